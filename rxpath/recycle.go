package rxpath

import (
	"errors"
	"fmt"

	"github.com/xdpkit/xdpkit/umem"
)

// ErrNotRunning is returned by Recycle called outside the handler of a
// running Run.
var ErrNotRunning = errors.New("rxpath: Run is not running")

// Recycle gives frames that the handler owns back to the Poller, for the
// Fill ring of a socket on u, in the order given and ahead of frames from
// the allocator. A forwarder passes the frames of its TX completions: the
// kernel completes them in the order it received them, and Recycle keeps
// that order on the Fill ring, as the frames of packets that were not kept
// keep it, so the kernel's copy-mode receive path walks the frames (and
// its own state of each) in sequence. Given back through the allocator
// instead (umem.UMEM.PutBatch), they come out for the refill mixed with
// frames freed earlier, an order that every batch shuffles further, and in
// copy mode the kernel then takes each Fill ring entry at a far higher
// cost. What the Fill ring does not take waits in the Poller for the next
// refill, ahead of what comes later; and once Recycle was used for a
// socket, its refills take frames from the allocator only while its Fill
// ring holds less than half of Config.FillFrames (and before a sleep),
// so that the frames in circulation stay the same ones, in order.
//
// Only the handler may call Recycle, from Receive or EndRound (Run's
// goroutine); elsewhere it returns ErrNotRunning and gives nothing back:
// give the frames to the allocator. An address outside u
// (umem.ErrBadAddress), a frame on a Fill ring (umem.ErrDoubleFree), or a u
// that none of the Poller's sockets uses (ErrConfig) stops it with an
// error; the frames before it were taken. Recycle does not look for a
// frame that the allocator has free, or one given twice in a row: give
// only frames you own, each once, as to a TX ring.
func (p *Poller) Recycle(u *umem.UMEM, addrs []uint64) error {
	if p.h == nil {
		return ErrNotRunning
	}
	// The socket on u whose Fill ring lacks the most frames.
	var s *sock
	for _, t := range p.socks {
		if t.pool.u == u && (s == nil || t.target-t.out-len(t.stash) > s.target-s.out-len(s.stash)) {
			s = t
		}
	}
	if s == nil {
		return fmt.Errorf("%w: Recycle: no socket of the Poller uses this UMEM", ErrConfig)
	}
	pl := s.pool
	s.recycles = true
	for _, a := range addrs {
		if a >= pl.size {
			return fmt.Errorf("rxpath: Recycle: %w: %#x", umem.ErrBadAddress, a)
		}
		i := pl.frame(a)
		if pl.lent[i>>6]&(1<<(i&63)) != 0 {
			return fmt.Errorf("rxpath: Recycle: %w: %#x is on a Fill ring", umem.ErrDoubleFree, a)
		}
		p.recycle(s, a)
	}
	return nil
}
