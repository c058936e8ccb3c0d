package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/craft"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/txpath"
)

type gen struct {
	s      *txpath.Sender
	flows  []*txpath.UDPFlow
	ids    []uint16 // the flows' numbers in the payload (flow f of -flows)
	sizes  []int
	seq    []uint64
	pat    []byte
	hdr    [payload.HeaderLen + payload.StampLen]byte
	hdrLen int
	stamp  bool // -timestamp: stamped payloads

	b    *craft.Builder // the field engine's frames, or
	rp   *replay        // a pcap replay (both nil: UDP from flows)
	pace pacer          // their rate

	sent, bytes, waits uint64
	k                  int              // position in sizes
	stopAtZero         bool             // a queue whose share of -count is 0 sends nothing
	pub                *cli.SenderStats // with -metrics: s's counters for a scrape, published per burst

	// The watchdog's view of the Sender, published by the loop: frames
	// completed so far, and whether any are in flight.
	done     atomic.Uint64
	inflight atomic.Bool
	sent2    atomic.Uint64 // sent, for the watchdog's message
}

// errStalled is the cause with which the watchdog ends a loop whose
// frames in flight saw no completion for the -stall bound.
type errStalled struct {
	bound           time.Duration
	sent, completed uint64
}

func (e *errStalled) Error() string {
	return fmt.Sprintf("TX stalled: frames in flight and none completed for %v (%d frames sent, %d completed)", e.bound, e.sent, e.completed)
}

// note publishes the Sender's completions for the watchdog.
func (g *gen) note() {
	st := g.s.Stats()
	g.done.Store(st.Completed)
	g.inflight.Store(g.s.InFlight() > 0 || g.s.Queued() > 0)
}

// watch cancels the loop's context with an *errStalled cause once frames
// are in flight and no completion has come for bound. It returns when
// ctx ends.
func (g *gen) watch(ctx context.Context, cancel context.CancelCauseFunc, bound time.Duration) {
	tick := time.NewTicker(max(bound/20, time.Millisecond))
	defer tick.Stop()
	last, since := g.done.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			d := g.done.Load()
			if d != last || !g.inflight.Load() {
				last, since = d, now
				continue
			}
			if now.Sub(since) >= bound {
				cancel(&errStalled{bound: bound, sent: g.sent2.Load(), completed: d})
				return
			}
		}
	}
}

// loop sends until count packets are out (0: no limit) or ctx ends, at pps
// packets per second (0: flat out). It fails when frames in flight see no
// completion for stall (longer at a rate below one packet per stall/3: the
// loop reaps only when it sends).
func (g *gen) loop(ctx context.Context, count uint64, pps float64, batch int, stall time.Duration, sent, bytes *atomic.Uint64) error {
	if count == 0 && g.stopAtZero {
		return nil
	}
	if pps > 0 {
		stall = max(stall, time.Duration(3/pps*float64(time.Second)))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g.note()
	go g.watch(ctx, cancel, stall)
	var err error
	if g.b != nil || g.rp != nil {
		err = g.sendFrames(ctx, count, &g.pace, batch, sent, bytes)
	} else {
		err = g.send(ctx, count, pps, batch, sent, bytes)
	}
	if cause := context.Cause(ctx); err == nil && cause != nil {
		var st *errStalled
		if errors.As(cause, &st) {
			return st
		}
	}
	return err
}

// send is loop's work; the watchdog's cancel ends it like ctx's end.
func (g *gen) send(ctx context.Context, count uint64, pps float64, batch int, sent, bytes *atomic.Uint64) error {
	start := time.Now()
	nflows := uint64(len(g.flows))
	for count == 0 || g.sent < count {
		if ctx.Err() != nil {
			return nil
		}
		burst := uint64(batch)
		if pps > 0 {
			due := uint64(pps*time.Since(start).Seconds()) + 1
			if due <= g.sent {
				if err := g.s.Flush(); err != nil {
					return err
				}
				g.note()
				wait := time.Duration(float64(g.sent+1-due) / pps * float64(time.Second))
				time.Sleep(max(wait, 50*time.Microsecond))
				continue
			}
			burst = min(burst, due-g.sent)
		}
		if count > 0 {
			burst = min(burst, count-g.sent)
		}
		for range burst {
			size := g.sizes[g.k]
			if g.k++; g.k == len(g.sizes) {
				g.k = 0
			}
			f := g.sent % nflows
			n := size - g.hdrLen
			seq := g.seq[f]
			head, body := g.hdr[:payload.HeaderLen], payload.Body(g.pat, seq, n)
			if g.stamp {
				// The send time as late as the packet is made: what
				// follows (the copy, the batch's Flush) is part of
				// the latency a receiver measures.
				payload.PutStamped(g.hdr[:], g.ids[f], n, seq, payload.TAINow())
				head, body = g.hdr[:], body[payload.StampLen:]
			} else {
				payload.Put(g.hdr[:], g.ids[f], n, seq)
			}
			for {
				err := g.s.SendUDP(g.flows[f], txpath.Options{}, head, body)
				if err == nil {
					break
				}
				if !errors.Is(err, txpath.ErrNoFrames) && !errors.Is(err, txpath.ErrRingFull) {
					return err
				}
				g.waits++
				err = g.s.Wait(ctx)
				g.note()
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
			g.seq[f]++
			g.sent++
			g.bytes += uint64(size)
		}
		if pps > 0 {
			if err := g.s.Flush(); err != nil {
				return err
			}
		}
		sent.Store(g.sent)
		g.sent2.Store(g.sent)
		bytes.Store(g.bytes)
		g.note()
		g.publish()
	}
	err := g.s.Flush()
	g.publish()
	return err
}

// publish hands the Sender's counters to a scrape (cli.SenderStats).
func (g *gen) publish() {
	if g.pub != nil {
		g.pub.Publish(g.s.Stats())
	}
}
