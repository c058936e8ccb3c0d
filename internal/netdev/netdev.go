package netdev

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var (
	// ErrNoDevice is returned for an interface that does not exist in the
	// calling thread's namespace. The error also wraps the underlying
	// netlink error.
	ErrNoDevice = errors.New("netdev: no such network interface")

	// ErrNotSupported is returned when the device does not support an
	// operation (for example a fixed TX checksum offload).
	ErrNotSupported = errors.New("netdev: not supported by the device")
)

// Where Info's features came from.
const (
	FromNetdevGenl = "netdev-genl" // the netdev generic-netlink family answered
	FromEthtool    = "ethtool"     // it did not exist: XDP/XSK fields are unknown (0)
)

// Where Info's queue counts came from.
const (
	QueuesFromEthtool = "ethtool-channels" // real_num_{rx,tx}_queues as the driver reports them
	QueuesFromNetlink = "rtnetlink"        // IFLA_NUM_{RX,TX}_QUEUES: allocated queues
)

// Info is what the TX and RX paths need to know about a device.
type Info struct {
	Name   string
	Index  int
	Driver string // ETHTOOL_GDRVINFO driver, "" when the device has none (lo)
	Kind   string // rtnetlink link kind as vishvananda/netlink names it ("veth", "device", ...)

	// RxQueues and TxQueues are the queues in use (real_num_*), which
	// bound the queue ids an AF_XDP socket can bind to.
	RxQueues, TxQueues int
	QueuesFrom         string

	MTU int

	// TxCsumOffload reports whether the device currently offloads TX
	// checksums (any of the tx-checksum-* features, ethtool -k
	// "tx-checksumming").
	TxCsumOffload bool

	XDPFeatures        XDPFeatures
	XDPRxMetadata      RxMetadataFeatures
	XSKFeatures        XSKFeatures
	XDPZeroCopyMaxSegs uint32 // only reported with XDPXSKZeroCopy
	FeaturesFrom       string // FromNetdevGenl or FromEthtool
}

// String summarizes the device on one line.
func (i Info) String() string {
	return fmt.Sprintf("%s (ifindex %d, driver %q, %d rx/%d tx queues, mtu %d, tx-csum %v, xdp [%v], xsk [%v], from %s)",
		i.Name, i.Index, i.Driver, i.RxQueues, i.TxQueues, i.MTU, i.TxCsumOffload, i.XDPFeatures, i.XSKFeatures, i.FeaturesFrom)
}

// Get returns the facts about the interface called name in the calling
// thread's network namespace (call it from vethns.NS.Do for a device in
// another namespace).
func Get(name string) (Info, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return Info{}, linkError(fmt.Sprintf("%q", name), err)
	}
	return get(l)
}

// GetByIndex is Get by interface index.
func GetByIndex(index int) (Info, error) {
	l, err := netlink.LinkByIndex(index)
	if err != nil {
		return Info{}, linkError(fmt.Sprintf("ifindex %d", index), err)
	}
	return get(l)
}

func linkError(what string, err error) error {
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%w: %s: %w", ErrNoDevice, what, err)
	}
	return fmt.Errorf("netdev: look up %s: %w", what, err)
}

func get(l netlink.Link) (Info, error) {
	at := l.Attrs()
	info := Info{
		Name:       at.Name,
		Index:      at.Index,
		Kind:       l.Type(),
		MTU:        at.MTU,
		RxQueues:   at.NumRxQueues,
		TxQueues:   at.NumTxQueues,
		QueuesFrom: QueuesFromNetlink,
	}

	fd, err := ioctlSocket()
	if err != nil {
		return Info{}, err
	}
	defer unix.Close(fd)

	drv, err := unix.IoctlGetEthtoolDrvinfo(fd, at.Name)
	switch {
	case err == nil:
		info.Driver = unix.ByteSliceToString(drv.Driver[:])
	case errors.Is(err, unix.EOPNOTSUPP):
	default:
		return Info{}, ethtoolError("ETHTOOL_GDRVINFO", at.Name, err)
	}

	ch, err := GetChannels(at.Name)
	switch {
	case err == nil && ch.RX+ch.Combined > 0 && ch.TX+ch.Combined > 0:
		info.RxQueues = ch.RX + ch.Combined
		info.TxQueues = ch.TX + ch.Combined
		info.QueuesFrom = QueuesFromEthtool
	case err == nil, errors.Is(err, ErrNotSupported):
	default:
		return Info{}, err
	}

	csum, err := ethtoolGetValue(fd, at.Name, ethtoolGTXCSUM)
	switch {
	case err == nil:
		info.TxCsumOffload = csum != 0
	case errors.Is(err, unix.EOPNOTSUPP):
	default:
		return Info{}, ethtoolError("ETHTOOL_GTXCSUM", at.Name, err)
	}

	f, err := getDevFeatures(at.Index)
	switch {
	case err == nil:
		info.XDPFeatures, info.XSKFeatures, info.XDPRxMetadata = f.xdp, f.xsk, f.rxMeta
		info.XDPZeroCopyMaxSegs = f.zcMaxSegs
		info.FeaturesFrom = FromNetdevGenl
	case errors.Is(err, errFamilyMissing):
		info.FeaturesFrom = FromEthtool
	case errors.Is(err, unix.ENODEV):
		return Info{}, fmt.Errorf("%w: ifindex %d (%s) vanished: %w", ErrNoDevice, at.Index, at.Name, err)
	default:
		return Info{}, fmt.Errorf("netdev: %s: %w", at.Name, err)
	}
	return info, nil
}

// ioctlSocket returns a socket in the calling thread's namespace for
// SIOCETHTOOL, which any socket family passes on to the device layer.
func ioctlSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	}
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return fd, nil
}

func ethtoolError(op, name string, err error) error {
	if errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%w: %q: %w", ErrNoDevice, name, os.NewSyscallError("ioctl(SIOCETHTOOL "+op+")", err))
	}
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("netdev: %s on %s needs CAP_NET_ADMIN: %w", op, name, os.NewSyscallError("ioctl(SIOCETHTOOL)", err))
	}
	return fmt.Errorf("netdev: %s on %s: %w", op, name, os.NewSyscallError("ioctl(SIOCETHTOOL)", err))
}

// SetTxCsumOffload turns TX checksum offload (every tx-checksum-* feature
// the device can change, like `ethtool -K name tx on|off`) on or off for
// the interface called name in the calling thread's namespace, and checks
// that the device took it. It needs CAP_NET_ADMIN.
func SetTxCsumOffload(name string, on bool) error {
	return setCsumOffload(name, "TX", ethtoolSTXCSUM, ethtoolGTXCSUM, on)
}

// SetRxCsumOffload turns RX checksum offload (rx-checksumming, like
// `ethtool -K name rx on|off`) on or off for the interface called name in
// the calling thread's namespace, and checks that the device took it. With
// it off, veth no longer marks received packets CHECKSUM_UNNECESSARY, so
// the kernel verifies their checksums. It needs CAP_NET_ADMIN.
func SetRxCsumOffload(name string, on bool) error {
	return setCsumOffload(name, "RX", ethtoolSRXCSUM, ethtoolGRXCSUM, on)
}

// SetGRO turns generic receive offload on or off (like `ethtool -K name
// gro on|off`) for the interface called name in the calling thread's
// namespace, and checks that the device took it. veth polls a NAPI
// instance per queue while GRO is on, with or without an XDP program. It
// needs CAP_NET_ADMIN.
func SetGRO(name string, on bool) error {
	return setFeature(name, "GRO", "generic receive offload", ethtoolSGRO, ethtoolGGRO, on)
}

func setCsumOffload(name, dir string, set, get uint32, on bool) error {
	return setFeature(name, dir+"CSUM", dir+" checksum offload", set, get, on)
}

// setFeature sets a legacy ethtool feature value (set, then get to check);
// cmd names the ioctls (ETHTOOL_S<cmd>, ETHTOOL_G<cmd>), what the feature.
func setFeature(name, cmd, what string, set, get uint32, on bool) error {
	fd, err := ioctlSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var v uint32
	if on {
		v = 1
	}
	if err := ethtoolSetValue(fd, name, set, v); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("%w: set %s on %s: %w", ErrNotSupported, what, name, err)
		}
		return ethtoolError("ETHTOOL_S"+cmd, name, err)
	}
	got, err := ethtoolGetValue(fd, name, get)
	if err != nil {
		return ethtoolError("ETHTOOL_G"+cmd, name, err)
	}
	if (got != 0) != on {
		return fmt.Errorf("%w: %s on %s stays %v (fixed feature)", ErrNotSupported, what, name, got != 0)
	}
	return nil
}
