package xsk

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/caps"
)

// ErrDeviceRefused reports a device setting the device or its driver
// refused; the error names the setting and wraps the kernel's error.
var ErrDeviceRefused = errors.New("xsk: the device refused the setting")

// MTU returns the interface's MTU.
func MTU(ifname string) (int, error) {
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: %w", ErrNoDevice, ifname, err)
	}
	return l.Attrs().MTU, nil
}

// SetMTU sets the interface's MTU through rtnetlink (RTM_NEWLINK
// IFLA_MTU), in the calling thread's network namespace. A value outside
// the device's range, or one its XDP program cannot take (a native XDP
// program without multi-buffer support and an MTU above a page),
// fails with ErrDeviceRefused.
func SetMTU(ifname string, mtu int) error {
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNoDevice, ifname, err)
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		if errors.Is(err, unix.EPERM) {
			return caps.Wrap("xsk: set MTU of "+ifname, caps.NetAdmin, os.NewSyscallError("RTM_NEWLINK", err))
		}
		return fmt.Errorf("%w: MTU %d on %s (was %d): %w", ErrDeviceRefused, mtu, ifname, l.Attrs().MTU, err)
	}
	return nil
}

// RingParams are a NIC's hardware ring sizes (struct ethtool_ringparam):
// the current number of descriptors on each ring and the largest the
// driver allows.
type RingParams struct {
	RX, TX       uint32 // rx_pending, tx_pending
	RXMax, TXMax uint32 // rx_max_pending, tx_max_pending
}

// Rings reads the interface's hardware ring sizes (ETHTOOL_GRINGPARAM).
// A driver without ring parameters (veth, for one) fails with
// ErrNotSupported.
func Rings(ifname string) (RingParams, error) {
	var rp ethtoolRingparam
	rp.cmd = unix.ETHTOOL_GRINGPARAM
	if err := ethtoolIoctl(ifname, &rp); err != nil {
		return RingParams{}, ringError("read the ring sizes of", ifname, err)
	}
	return RingParams{RX: rp.rxPending, TX: rp.txPending, RXMax: rp.rxMaxPending, TXMax: rp.txMaxPending}, nil
}

// SetRings sets the interface's hardware RX and TX ring sizes
// (ETHTOOL_SRINGPARAM); 0 keeps a size as it is. A size above the
// driver's maximum fails with ErrDeviceRefused before any change; a
// driver that cannot resize its rings fails with ErrNotSupported.
func SetRings(ifname string, rx, tx uint32) error {
	var rp ethtoolRingparam
	rp.cmd = unix.ETHTOOL_GRINGPARAM
	if err := ethtoolIoctl(ifname, &rp); err != nil {
		return ringError("read the ring sizes of", ifname, err)
	}
	if rx > rp.rxMaxPending || tx > rp.txMaxPending {
		return fmt.Errorf("%w: rings rx %d tx %d on %s, which allows at most rx %d tx %d",
			ErrDeviceRefused, rx, tx, ifname, rp.rxMaxPending, rp.txMaxPending)
	}
	if rx != 0 {
		rp.rxPending = rx
	}
	if tx != 0 {
		rp.txPending = tx
	}
	rp.cmd = unix.ETHTOOL_SRINGPARAM
	if err := ethtoolIoctl(ifname, &rp); err != nil {
		return ringError(fmt.Sprintf("set rings rx %d tx %d on", rp.rxPending, rp.txPending), ifname, err)
	}
	return nil
}

func ringError(op, ifname string, err error) error {
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: the driver of %s has no ethtool ring parameters (%s): %w", ErrNotSupported, ifname, op, err)
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("%w: %q: %w", ErrNoDevice, ifname, err)
	case errors.Is(err, unix.EPERM):
		return caps.Wrap("xsk: "+op+" "+ifname, caps.NetAdmin, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrDeviceRefused, op, ifname, err)
}
