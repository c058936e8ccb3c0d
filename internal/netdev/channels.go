package netdev

import (
	"errors"
	"fmt"
	"os"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/caps"
)

// Channel counts are read and set with github.com/safchain/ethtool, a
// maintained SIOCETHTOOL wrapper whose only dependency is x/sys:
// mdlayher/ethtool (generic netlink, v0.7.0) has no channels request. It
// costs one socket per call, on set-up paths only. (Its struct ifreq is
// 24 bytes where the kernel copies in 40; the extra bytes it reads are
// never used for these commands.)

// Channels are a device's channel counts (ethtool -l): the maxima the
// driver allows and the counts in use. A driver reports either separate RX
// and TX channels (veth), combined ones (most NICs), or both.
type Channels struct {
	MaxRX, MaxTX, MaxOther, MaxCombined int
	RX, TX, Other, Combined             int
}

// Queues is the number of queues an AF_XDP socket can bind to on the RX
// side: combined channels plus RX-only ones.
func (c Channels) Queues() int { return c.Combined + c.RX }

// MaxQueues is the most queues SetQueues can ask for.
func (c Channels) MaxQueues() int { return max(c.MaxCombined, c.MaxRX) }

// String names the value, for messages.
func (c Channels) String() string {
	return fmt.Sprintf("rx %d/%d, tx %d/%d, other %d/%d, combined %d/%d",
		c.RX, c.MaxRX, c.TX, c.MaxTX, c.Other, c.MaxOther, c.Combined, c.MaxCombined)
}

// GetChannels reads the channel counts of the interface called name in
// the calling thread's namespace (ETHTOOL_GCHANNELS). A driver without
// the call gives an error matching ErrNotSupported.
func GetChannels(name string) (Channels, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return Channels{}, os.NewSyscallError("socket", err)
	}
	defer e.Close()
	ch, err := e.GetChannels(name)
	if err != nil {
		return Channels{}, channelsError("get", name, err)
	}
	return fromEthtool(ch), nil
}

// SetQueues sets the number of queues of the interface called name to n
// (ETHTOOL_SCHANNELS): the combined channels when the driver has them,
// otherwise the RX and TX channels (veth). It returns the counts read back.
// It needs CAP_NET_ADMIN; a driver that cannot change them gives an error
// matching ErrNotSupported.
func SetQueues(name string, n int) (Channels, error) {
	cur, err := GetChannels(name)
	if err != nil {
		return Channels{}, err
	}
	want := toEthtool(cur)
	switch {
	case cur.MaxCombined > 0:
		if n > cur.MaxCombined {
			return cur, fmt.Errorf("netdev: %s: %d queues, at most %d combined channels: %w", name, n, cur.MaxCombined, unix.EINVAL)
		}
		want.CombinedCount = uint32(n)
	case cur.MaxRX > 0 && cur.MaxTX > 0:
		if n > cur.MaxRX || n > cur.MaxTX {
			return cur, fmt.Errorf("netdev: %s: %d queues, at most %d RX and %d TX channels: %w", name, n, cur.MaxRX, cur.MaxTX, unix.EINVAL)
		}
		want.RxCount, want.TxCount = uint32(n), uint32(n)
	default:
		return cur, fmt.Errorf("netdev: %s: no settable channels (%v): %w", name, cur, ErrNotSupported)
	}
	if want == toEthtool(cur) {
		return cur, nil
	}
	e, err := ethtool.NewEthtool()
	if err != nil {
		return Channels{}, os.NewSyscallError("socket", err)
	}
	defer e.Close()
	if _, err := e.SetChannels(name, want); err != nil {
		return cur, channelsError("set", name, err)
	}
	return GetChannels(name)
}

func channelsError(op, name string, err error) error {
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("netdev: %s channels of %s: %w: %w", op, name, ErrNotSupported, err)
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("%w: %q: %w", ErrNoDevice, name, err)
	case errors.Is(err, unix.EPERM):
		return caps.Wrap(fmt.Sprintf("netdev: %s channels of %s: ioctl(SIOCETHTOOL)", op, name), caps.NetAdmin, err)
	}
	return fmt.Errorf("netdev: %s channels of %s: %w", op, name, os.NewSyscallError("ioctl(SIOCETHTOOL)", err))
}

func fromEthtool(c ethtool.Channels) Channels {
	return Channels{
		MaxRX: int(c.MaxRx), MaxTX: int(c.MaxTx), MaxOther: int(c.MaxOther), MaxCombined: int(c.MaxCombined),
		RX: int(c.RxCount), TX: int(c.TxCount), Other: int(c.OtherCount), Combined: int(c.CombinedCount),
	}
}

func toEthtool(c Channels) ethtool.Channels {
	return ethtool.Channels{
		MaxRx: uint32(c.MaxRX), MaxTx: uint32(c.MaxTX), MaxOther: uint32(c.MaxOther), MaxCombined: uint32(c.MaxCombined),
		RxCount: uint32(c.RX), TxCount: uint32(c.TX), OtherCount: uint32(c.Other), CombinedCount: uint32(c.Combined),
	}
}
