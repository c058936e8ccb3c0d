package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
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

	sent, bytes, waits uint64
	k                  int              // position in sizes
	stopAtZero         bool             // a queue whose share of -count is 0 sends nothing
	pub                *cli.SenderStats // with -metrics: s's counters for a scrape, published per burst
}

// loop sends until count packets are out (0: no limit) or ctx ends, at pps
// packets per second (0: flat out).
func (g *gen) loop(ctx context.Context, count uint64, pps float64, batch int, sent, bytes *atomic.Uint64) error {
	if count == 0 && g.stopAtZero {
		return nil
	}
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
				if err := g.s.Wait(ctx); err != nil {
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
		bytes.Store(g.bytes)
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
