package main

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/txpath"
)

// l1Overhead is what an Ethernet frame costs on the wire beyond the bytes
// xdpgen writes: preamble and start delimiter (8), FCS (4) and the
// minimum inter-frame gap (12).
const l1Overhead = 24

// pacer spaces packets at a rate in packets or bits per second.
type pacer struct {
	rate     float64 // packets or bits per second; 0: flat out
	bits     bool    // rate is in bits per second of frames (+overhead bytes each)
	overhead int
	start    time.Time
	cost     float64 // packets or bits sent so far
	allow    float64 // what the clock allowed when last read
}

// delay is how long the next packet of size bytes must wait (0: it may
// go now); its cost, for sent.
func (p *pacer) delay(size int) (time.Duration, float64) {
	if p.rate == 0 {
		return 0, 0
	}
	c := 1.0
	if p.bits {
		c = float64(size+p.overhead) * 8
	}
	if p.cost <= p.allow {
		return 0, c
	}
	p.allow = p.rate * time.Since(p.start).Seconds()
	if p.cost <= p.allow {
		return 0, c
	}
	return time.Duration((p.cost - p.allow) / p.rate * float64(time.Second)), c
}

// sendFrames is send for the modes that write whole frames: the field
// engine's (g.b) and pcap replay (g.rp). Up to count packets (0: no
// limit) until ctx ends or the replay's last loop ends, paced by p.
func (g *gen) sendFrames(ctx context.Context, count uint64, p *pacer, batch int, sent, bytes *atomic.Uint64) error {
	p.start = time.Now()
	for count == 0 || g.sent < count {
		if ctx.Err() != nil {
			return nil
		}
		var sleep time.Duration
		done := false
		for n := 0; n < batch && (count == 0 || g.sent < count); n++ {
			var data []byte
			var size int
			if g.rp != nil {
				d, _, err := g.rp.peek()
				if err == io.EOF {
					done = true
					break
				}
				if err != nil {
					return err
				}
				if g.rp.original {
					if w := g.rp.wait(time.Now()); w > 0 {
						sleep = w
						break
					}
				}
				data, size = d, len(d)
			} else {
				size = g.b.NextLen()
			}
			w, c := p.delay(size)
			if w > 0 {
				sleep = w
				break
			}
			for {
				err := g.one(data)
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
			p.cost += c
			g.sent++
			g.bytes += uint64(size)
		}
		if p.rate > 0 || sleep > 0 || done || g.rp != nil && g.rp.original {
			if err := g.s.Flush(); err != nil {
				return err
			}
		}
		sent.Store(g.sent)
		g.sent2.Store(g.sent)
		bytes.Store(g.bytes)
		g.note()
		g.publish()
		if done {
			break
		}
		if sleep > 0 {
			// In slices of at most 100 ms, so that a long gap of a
			// capture still ends with ctx.
			time.Sleep(min(max(sleep, 20*time.Microsecond), 100*time.Millisecond))
		}
	}
	err := g.s.Flush()
	g.publish()
	return err
}

// one sends the replay's packet data, or the field engine's next frame
// written in place.
func (g *gen) one(data []byte) error {
	if g.rp != nil {
		if err := g.s.SendFrame(txpath.Options{}, data); err != nil {
			return err
		}
		g.rp.sent()
		return nil
	}
	f, err := g.s.Next()
	if err != nil {
		return err
	}
	return g.s.Commit(f, g.b.Build(f.Buf), txpath.Options{})
}
