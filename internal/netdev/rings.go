package netdev

import (
	"errors"
	"fmt"
	"os"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// Rings are a device's descriptor ring sizes (ethtool -g): the maxima the
// driver allows and the sizes in use.
type Rings struct {
	MaxRX, MaxTX int
	RX, TX       int
}

// String names the value, for messages.
func (r Rings) String() string {
	return fmt.Sprintf("rx %d/%d, tx %d/%d", r.RX, r.MaxRX, r.TX, r.MaxTX)
}

// GetRings reads the ring sizes of the interface called name in the
// calling thread's namespace (ETHTOOL_GRINGPARAM). A driver without the
// call (veth before Linux 5.16, lo) gives an error matching
// ErrNotSupported.
func GetRings(name string) (Rings, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return Rings{}, os.NewSyscallError("socket", err)
	}
	defer e.Close()
	r, err := e.GetRing(name)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return Rings{}, fmt.Errorf("netdev: ring sizes of %s: %w: %w", name, ErrNotSupported, err)
		}
		return Rings{}, fmt.Errorf("netdev: ring sizes of %s: %w", name, os.NewSyscallError("ioctl(SIOCETHTOOL)", err))
	}
	return Rings{MaxRX: int(r.RxMaxPending), MaxTX: int(r.TxMaxPending), RX: int(r.RxPending), TX: int(r.TxPending)}, nil
}
