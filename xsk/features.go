package xsk

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/caps"
)

// Features says which optional kernel features a Socket uses, probed by
// asking the kernel while New sets the socket up (never from the kernel
// version), and what it does without the missing ones.
type Features struct {
	// TXBudget is the XDP_MAX_TX_SKB_BUDGET in effect (Linux 6.17): the
	// Config's MaxTXBudget when the kernel took it, 0 when none was asked
	// or the kernel lacks the option (setsockopt says ENOPROTOOPT); copy
	// mode then sends at most 32 frames per sendto, and the caller kicks
	// again.
	TXBudget uint32
	// NoTXBudget reports that MaxTXBudget was asked and the kernel lacks
	// the option.
	NoTXBudget bool
	// Stats is what XDP_STATISTICS gives: StatsExtended (Linux 5.9: ring
	// full, fill ring empty, TX ring empty), StatsBasic (the first three
	// counters; the others read 0) or StatsNone (refused; Stats fails with
	// ErrNotSupported).
	Stats StatsLevel
	// NeedWakeup, MultiBuffer and ZeroCopy are the bind's outcome.
	NeedWakeup, MultiBuffer, ZeroCopy bool
}

// StatsLevel is how much of struct xdp_statistics the kernel fills.
type StatsLevel uint8

// Levels of XDP_STATISTICS.
const (
	StatsExtended StatsLevel = iota // 6 counters (Linux 5.9)
	StatsBasic                      // rx_dropped, rx_invalid_descs, tx_invalid_descs
	StatsNone                       // getsockopt(XDP_STATISTICS) refused
)

// String names the level.
func (l StatsLevel) String() string {
	switch l {
	case StatsExtended:
		return "extended"
	case StatsBasic:
		return "basic"
	case StatsNone:
		return "none"
	}
	return fmt.Sprintf("StatsLevel(%d)", int(l))
}

// String lists the features on one line, e.g. "copy mode, need_wakeup,
// TX budget 256, stats extended".
func (f Features) String() string {
	var b []string
	if f.ZeroCopy {
		b = append(b, "zero-copy")
	} else {
		b = append(b, "copy mode")
	}
	if f.NeedWakeup {
		b = append(b, "need_wakeup")
	}
	if f.MultiBuffer {
		b = append(b, "multi-buffer")
	}
	switch {
	case f.TXBudget > 0:
		b = append(b, fmt.Sprintf("TX budget %d", f.TXBudget))
	case f.NoTXBudget:
		b = append(b, "no XDP_MAX_TX_SKB_BUDGET (kernel before 6.17): 32 frames per sendto")
	}
	b = append(b, "stats "+f.Stats.String())
	return strings.Join(b, ", ")
}

// Features reports the optional kernel features the socket uses.
func (s *Socket) Features() Features {
	f := s.features
	f.NeedWakeup, f.MultiBuffer, f.ZeroCopy = s.wakeup, s.sg, s.zc
	return f
}

// ErrTXBudget is returned by New for a MaxTXBudget the kernel would refuse
// (EACCES): below 32 or above the TX ring's size, or without a TX ring.
var ErrTXBudget = errors.New("xsk: MaxTXBudget must be between 32 and the TX ring size")

// XDP_MAX_TX_SKB_BUDGET (Linux 6.17), missing from golang.org/x/sys.
const xdpMaxTxSkbBudget = 9

// minTXBudget is the kernel's TX_BATCH_SIZE, the lowest budget it takes.
const minTXBudget = 32

func checkTXBudget(c *Config) error {
	if c.MaxTXBudget == 0 {
		return nil
	}
	if c.NoTX || c.MaxTXBudget < minTXBudget || c.MaxTXBudget > c.TXSize {
		return fmt.Errorf("%w: %d with a %d-entry TX ring (NoTX %v)", ErrTXBudget, c.MaxTXBudget, c.TXSize, c.NoTX)
	}
	return nil
}

// setTXBudget sets XDP_MAX_TX_SKB_BUDGET where the kernel has it.
func (s *Socket) setTXBudget(c *Config) error {
	err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, xdpMaxTxSkbBudget, int(c.MaxTXBudget))
	switch {
	case err == nil:
		s.features.TXBudget = c.MaxTXBudget
		return nil
	case errors.Is(err, unix.ENOPROTOOPT):
		s.features.NoTXBudget = true
		return nil
	case errors.Is(err, unix.EACCES):
		// Not a permission: the kernel's answer to a budget outside
		// [32, TX ring size], which checkTXBudget should have caught.
		return fmt.Errorf("%w: %d: %w", ErrTXBudget, c.MaxTXBudget, os.NewSyscallError("setsockopt(XDP_MAX_TX_SKB_BUDGET)", err))
	}
	return caps.Wrap("xsk: setsockopt(XDP_MAX_TX_SKB_BUDGET)", caps.NetAdmin, os.NewSyscallError("setsockopt", err))
}

// probeStats reads XDP_STATISTICS once to learn how much of it the kernel
// fills.
func (s *Socket) probeStats() {
	_, n, err := getStats(s.fd)
	switch {
	case err != nil:
		s.features.Stats = StatsNone
	case n < statsSize:
		s.features.Stats = StatsBasic
	default:
		s.features.Stats = StatsExtended
	}
}

// BPFLink reports whether the program is attached as a bpf_link (Linux
// 5.9), which the kernel detaches when the process dies. On older kernels
// it is attached through rtnetlink instead: Close detaches it, but a
// process killed before Close leaves it attached (ip link set dev IFACE
// xdp off removes it).
func (p *Program) BPFLink() bool { return p.p.BPFLink() }
