package rxpath

import (
	"errors"
	"fmt"

	"github.com/xdpkit/xdpkit/umem"
)

// ErrNotRunning is returned by Recycle called while no Run runs (before
// Run, or after it returned). Recycle is only for Run's goroutine (the
// handler's Receive or EndRound): called from another goroutine, also
// while Run runs, it is a data race, which this error does not report.
var ErrNotRunning = errors.New("rxpath: Run is not running")

// Recycle gives frames that the handler owns back to the Poller, for the
// Fill ring of a socket on u, in the order given and ahead of frames from
// the allocator. A forwarder passes the frames of its TX completions, in
// the order they complete: the kernel completes a TX ring's frames in the
// order they were put on it, so a forwarder that sends on one socket what
// it received, in the order received, gives them back in the order the
// kernel filled them, as the frames of packets that were not kept come
// back. Given back through the allocator instead (umem.UMEM.PutBatch),
// they come out for the refill mixed with frames freed earlier, in an
// order that every batch changes, and in copy mode the kernel's receive
// path then takes the Fill ring's frames (and its own state of each) out
// of sequence. The frames wait in the Poller for the next refill, ahead of
// what comes later; what that refill's ring does not take (beyond
// Config.FillFrames) goes to the allocator. During a Run in which
// Recycle gave frames for a socket, its refills take frames from the
// allocator only while its Fill ring holds less than half of
// Config.FillFrames or none, and a refill before a sleep only as many as
// its Fill and RX rings and the frames waiting in the Poller leave short
// of Config.FillFrames (frames on a TX ring count as missing, and come
// back beyond it): the frames in circulation stay the same ones, in
// order.
//
// Call Recycle only on Run's goroutine: from the handler's Receive or
// EndRound. Before Run and after it returned, it returns ErrNotRunning
// and takes nothing: give the frames to the allocator. From another
// goroutine it is a data race. Recycle checks every address before it
// takes any, and on an error takes none: an address outside u
// (umem.ErrBadAddress), a frame on a Fill ring or given to Recycle already
// and not yet back on a Fill ring, named twice, or of the packet in
// Receive that was not kept (umem.ErrDoubleFree), or
// a u that none of the Poller's sockets uses (ErrConfig). It cannot see a
// frame that the allocator has free: the Poller would then put the frame
// on a Fill ring while the allocator may hand it out too. Give only frames
// you own, each once, as to a TX ring. If such a frame reaches the
// allocator twice (when the Poller gives back what no Fill ring takes, or
// as Run returns), the allocator keeps one and Run returns
// umem.ErrDoubleFree.
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
	// Every address is checked before any is taken: an error leaves the
	// frames with the caller. The stashed bits marked here catch a frame
	// named twice in addrs; recycle marks them again.
	for k, a := range addrs {
		var err error
		if a >= pl.size {
			err = fmt.Errorf("rxpath: Recycle: %w: %#x", umem.ErrBadAddress, a)
		} else {
			i := pl.frame(a)
			w, b := i>>6, uint64(1)<<(i&63)
			switch {
			case pl.lent[w]&b != 0:
				err = fmt.Errorf("rxpath: Recycle: %w: %#x is on a Fill ring", umem.ErrDoubleFree, a)
			case pl.stashed[w]&b != 0:
				err = fmt.Errorf("rxpath: Recycle: %w: %#x was given back already", umem.ErrDoubleFree, a)
			case p.receiving(pl, i):
				err = fmt.Errorf("rxpath: Recycle: %w: %#x is the packet in Receive, not kept", umem.ErrDoubleFree, a)
			default:
				pl.stashed[w] |= b
				continue
			}
		}
		pl.unstash(addrs[:k])
		return err
	}
	s.recycles = true
	for _, a := range addrs {
		p.recycle(s, a)
	}
	return nil
}

// receiving reports whether frame i of pl belongs to the packet that
// Receive has now, lent and not kept: the Poller recycles its frames
// when Receive returns.
func (p *Poller) receiving(pl *pool, i uint64) bool {
	if p.pkt.kept || p.pkt.Socket == nil || p.pkt.Socket.UMEM() != pl.u {
		return false
	}
	for _, d := range p.pkt.descs {
		if pl.frame(d.Addr) == i {
			return true
		}
	}
	return false
}
