package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/rxpath"
)

// One-way latency of stamped payloads (xdpgen -timestamp): the receive
// time minus the send time in the payload, both CLOCK_TAI on one host.
// The receive time is, by -latency-clock:
//
//	device  the device's RX timestamp (rxpath.Packet.RXTimestamp): a NIC's
//	        hardware clock, meaningful only when phc2sys keeps it in step
//	        with CLOCK_TAI; veth has none
//	xdp     the XDP program's time (rxpath.Packet.XDPTime): when the
//	        packet was redirected, in the driver's receive path
//	user    xdprecv's own clock when its handler sees the packet: also
//	        counts the RX ring and the poller's wake-up
//	auto    the first of device, xdp, user that the packet has
const (
	clockAuto = iota
	clockDevice
	clockXDP
	clockUser
)

var clockNames = []string{"auto", "device", "xdp", "user"}

func parseClock(s string) (int, error) {
	for i, n := range clockNames {
		if strings.EqualFold(s, n) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("-latency-clock %q: want auto, device, xdp or user", s)
}

// Histogram range: 1 ns to 100 s with 3 significant digits (HdrHistogram
// keeps the relative error below 0.1% over the whole range).
const (
	latMin    = 1
	latMax    = int64(100 * time.Second)
	latDigits = 3
)

// latency is one queue's histogram. The queue's goroutine records (no
// allocation: the histogram is allocated up front and values are clamped
// into its range, so RecordValue never fails); the summary and metrics
// read it under mu.
type latency struct {
	clock int
	mu    sync.Mutex
	h     *hdrhistogram.Histogram
	// iv holds the samples since the -json stream's last line (nil
	// without -json).
	iv *hdrhistogram.Histogram
	// Counts by where the receive time came from, and of packets left
	// out: a receive time before the send time (clocks not in step), or
	// none from the chosen clock.
	fromDevice, fromXDP, fromUser, negative, noClock uint64
}

func newLatency(clock int) *latency {
	return &latency{clock: clock, h: hdrhistogram.New(latMin, latMax, latDigits)}
}

// observe records the latency of p, sent at sent (CLOCK_TAI ns).
func (l *latency) observe(p *rxpath.Packet, sent int64) {
	var now int64
	src := -1
	if l.clock == clockAuto || l.clock == clockDevice {
		if ts, ok := p.RXTimestamp(); ok {
			now, src = ts, clockDevice
		}
	}
	if src < 0 && (l.clock == clockAuto || l.clock == clockXDP) {
		if ts, ok := p.XDPTime(); ok {
			now, src = ts, clockXDP
		}
	}
	if src < 0 && (l.clock == clockAuto || l.clock == clockUser) {
		now, src = payload.TAINow(), clockUser
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch src {
	case -1:
		l.noClock++
		return
	case clockDevice:
		l.fromDevice++
	case clockXDP:
		l.fromXDP++
	case clockUser:
		l.fromUser++
	}
	d := now - sent
	if d < 0 {
		l.negative++
		return
	}
	_ = l.h.RecordValue(min(max(d, latMin), latMax)) // in range: cannot fail
	if l.iv != nil {
		_ = l.iv.RecordValue(min(max(d, latMin), latMax))
	}
}

// LatencySummary is the one-way latency over all queues, in
// microseconds.
type LatencySummary struct {
	Clock                         string // -latency-clock
	Samples                       int64
	P50Us, P99Us, P999Us, MaxUs   float64
	MinUs, MeanUs                 float64
	FromDevice, FromXDP, FromUser uint64 // samples by receive clock
	Negative                      uint64 // receive time before the send time: left out
	NoClock                       uint64 // stamped packets without the chosen clock: left out
}

// merge sums the queues' histograms and counts.
func mergeLatency(ls []*latency) (*hdrhistogram.Histogram, LatencySummary) {
	all := hdrhistogram.New(latMin, latMax, latDigits)
	var s LatencySummary
	for _, l := range ls {
		l.mu.Lock()
		all.Merge(l.h)
		s.FromDevice += l.fromDevice
		s.FromXDP += l.fromXDP
		s.FromUser += l.fromUser
		s.Negative += l.negative
		s.NoClock += l.noClock
		l.mu.Unlock()
	}
	return all, s
}

func latencySummary(ls []*latency) *LatencySummary {
	if len(ls) == 0 {
		return nil
	}
	h, s := mergeLatency(ls)
	s.Clock = clockNames[ls[0].clock]
	s.Samples = h.TotalCount()
	if s.Samples > 0 {
		us := func(v int64) float64 { return float64(v) / 1e3 }
		s.P50Us, s.P99Us, s.P999Us = us(h.ValueAtQuantile(50)), us(h.ValueAtQuantile(99)), us(h.ValueAtQuantile(99.9))
		s.MaxUs, s.MinUs, s.MeanUs = us(h.Max()), us(h.Min()), h.Mean()/1e3
	}
	return &s
}

// String is the summary's human line.
func (s *LatencySummary) String() string {
	return fmt.Sprintf("latency (%s clock; %d samples: %d device, %d xdp, %d user; %d negative, %d without clock left out): p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us",
		s.Clock, s.Samples, s.FromDevice, s.FromXDP, s.FromUser, s.Negative, s.NoClock, s.P50Us, s.P99Us, s.P999Us, s.MaxUs)
}

// latencyView merges the queues' histograms for the metrics once per
// scrape, not once per series, into a histogram of its own kept between
// scrapes: a merge takes each queue's lock, which the receive path takes
// for every packet.
type latencyView struct {
	ls []*latency
	mu sync.Mutex
	h  *hdrhistogram.Histogram
	at time.Time
}

// value returns f of the merged histogram, merging again when the last
// merge is older than a scrape's duration.
func (v *latencyView) value(f func(h *hdrhistogram.Histogram) float64) float64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.h == nil {
		v.h = hdrhistogram.New(latMin, latMax, latDigits)
	}
	if now := time.Now(); now.Sub(v.at) > 100*time.Millisecond {
		v.h.Reset()
		for _, l := range v.ls {
			l.mu.Lock()
			v.h.Merge(l.h)
			l.mu.Unlock()
		}
		v.at = now
	}
	return f(v.h)
}

// latencyMetrics are the percentiles and counts for -metrics, computed
// from the histograms at scrape time.
func latencyMetrics(ls []*latency) []cli.Metric {
	if len(ls) == 0 {
		return nil
	}
	view := &latencyView{ls: ls}
	var ms []cli.Metric
	for _, q := range []struct {
		label string
		q     float64
	}{{"0.5", 50}, {"0.99", 99}, {"0.999", 99.9}, {"1", 100}} {
		ms = append(ms, cli.Metric{Name: "latency_seconds", Help: "One-way latency of timestamped generator packets, by quantile (1: the largest).",
			Labels: prometheus.Labels{"quantile": q.label}, Gauge: true,
			Value: func() float64 {
				return view.value(func(h *hdrhistogram.Histogram) float64 {
					if q.q == 100 {
						return float64(h.Max()) / 1e9
					}
					return float64(h.ValueAtQuantile(q.q)) / 1e9
				})
			}})
	}
	ms = append(ms, cli.Metric{Name: "latency_samples_total", Help: "Timestamped generator packets whose latency was recorded.",
		Value: func() float64 {
			return view.value(func(h *hdrhistogram.Histogram) float64 { return float64(h.TotalCount()) })
		}})
	return ms
}
