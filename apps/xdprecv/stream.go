package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xdpkit/xdpkit/mq"
)

// With -json, xdprecv's standard output is JSON only, one object per
// line, each with a Type:
//
//	ready     once every queue's Fill ring has its frames
//	interval  once a second: the counts of that second (Packets, Bytes,
//	          Valid, Lost, ...), its rates and, with -latency, the
//	          percentiles of that second's samples
//	summary   at the end: the Summary, the same fields as the summary line
//	          without -json
//
// Lost in an interval is the change of the summary's Lost: negative when
// reordered datagrams fill gaps counted earlier.

// readyEvent is the ready line.
type readyEvent struct {
	Type   string
	Iface  string
	Queues int
	Port   int
}

// Interval is one line of the -json stream: what arrived in one second.
type Interval struct {
	Type       string    // "interval"
	Time       time.Time // the end of the interval
	Seconds    float64   // since the start
	Interval   float64   // the interval's length in seconds
	Packets    uint64
	Bytes      uint64
	PPS        float64
	Mbps       float64
	Valid      uint64
	Lost       int64
	Reordered  uint64
	Duplicates uint64
	BadCsum    uint64 // bad IPv4 header and UDP checksums
	BadPayload uint64
	XDPDropped uint64 // XDP_STATISTICS rx_dropped + rx_ring_full
	Total      uint64 // packets since the start
	// Latency is the one-way latency of the interval's stamped packets
	// (-latency), in microseconds.
	Latency *IntervalLatency `json:",omitempty"`
	// Proto counts the interval's traffic other than xdpgen's UDP.
	Proto *ProtoSummary `json:",omitempty"`
}

// IntervalLatency is an interval's latency percentiles.
type IntervalLatency struct {
	Samples                     int64
	P50Us, P99Us, P999Us, MaxUs float64
}

// totals are the running totals the stream takes differences of.
type totals struct {
	packets, bytes, valid, lost, late, dups uint64
	badCsum, badPayload, xdpDropped         uint64
	proto                                   *ProtoSummary
}

func readTotals(set *mq.Set, rs []*receiver) totals {
	var t totals
	for _, r := range rs {
		t.packets += r.packets.Load()
		t.bytes += r.bytes.Load()
		t.valid += r.valid.Load()
		t.lost += r.lost()
		t.late += r.late.Load()
		t.dups += r.dups.Load()
		t.badCsum += r.badIP.Load() + r.badUDP.Load()
		t.badPayload += r.badData.Load()
		if r.proto != nil {
			if t.proto == nil {
				t.proto = &ProtoSummary{}
			}
			t.proto.add(r.proto)
		}
	}
	x := set.Stats().Total.XDP
	t.xdpDropped = x.RXDropped + x.RXRingFull
	return t
}

// interval is the line for the change from prev to cur over dt.
func (cur *totals) interval(prev *totals, dt time.Duration) Interval {
	s := dt.Seconds()
	if s <= 0 {
		s = 1e-9
	}
	reord := func(t *totals) uint64 { return t.late - min(t.late, t.dups) }
	iv := Interval{
		Type: "interval", Interval: s,
		Packets: cur.packets - prev.packets, Bytes: cur.bytes - prev.bytes, Valid: cur.valid - prev.valid,
		Lost:      int64(cur.lost) - int64(prev.lost),
		Reordered: reord(cur) - min(reord(cur), reord(prev)), Duplicates: cur.dups - prev.dups,
		BadCsum: cur.badCsum - prev.badCsum, BadPayload: cur.badPayload - prev.badPayload,
		XDPDropped: cur.xdpDropped - prev.xdpDropped, Total: cur.packets,
	}
	iv.PPS = float64(iv.Packets) / s
	iv.Mbps = float64(iv.Bytes) * 8 / s / 1e6
	if cur.proto != nil {
		p := prev.proto
		if p == nil {
			p = &ProtoSummary{}
		}
		d := cur.proto.sub(p)
		iv.Proto = &d
	}
	return iv
}

// intervalLatency merges and resets the queues' interval histograms into
// h (reset first); nil without -latency.
func intervalLatency(lats []*latency, h *hdrhistogram.Histogram) *IntervalLatency {
	if len(lats) == 0 {
		return nil
	}
	h.Reset()
	for _, l := range lats {
		l.mu.Lock()
		if l.iv != nil {
			h.Merge(l.iv)
			l.iv.Reset()
		}
		l.mu.Unlock()
	}
	il := &IntervalLatency{Samples: h.TotalCount()}
	if il.Samples > 0 {
		us := func(v int64) float64 { return float64(v) / 1e3 }
		il.P50Us, il.P99Us, il.P999Us, il.MaxUs = us(h.ValueAtQuantile(50)), us(h.ValueAtQuantile(99)), us(h.ValueAtQuantile(99.9)), us(h.Max())
	}
	return il
}

var stdoutMu sync.Mutex

// jsonLine writes v as one line on standard output.
func jsonLine(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"Type":"error","Error":%q}`, err.Error()))
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

// startStream writes an interval line every second until the returned
// function is called; that function writes the last (partial) interval
// and returns once the goroutine has ended.
func startStream(start time.Time, set *mq.Set, rs []*receiver, lats []*latency) (stop func()) {
	quit := make(chan struct{})
	var done atomic.Bool
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		h := hdrhistogram.New(latMin, latMax, latDigits)
		prev, at := totals{}, start
		emit := func(now time.Time) {
			cur := readTotals(set, rs)
			iv := cur.interval(&prev, now.Sub(at))
			iv.Time, iv.Seconds = now, now.Sub(start).Seconds()
			iv.Latency = intervalLatency(lats, h)
			jsonLine(iv)
			prev, at = cur, now
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				emit(now)
			case <-quit:
				if now := time.Now(); now.Sub(at) > 10*time.Millisecond {
					emit(now)
				}
				return
			}
		}
	}()
	return func() {
		if done.CompareAndSwap(false, true) {
			close(quit)
		}
		<-ended
	}
}

// summaryLine is the -json stream's last line.
type summaryLine struct {
	Type string
	*Summary
}
