package main

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLatHistQuantiles compares the histogram's quantiles with the exact
// ones of a synthetic sample: within a bucket's width (1/64 of the value).
func TestLatHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := &latHist{}
	var vs []uint64
	for range 100_000 {
		v := uint64(rng.ExpFloat64() * 20_000) // about 20 us, a long tail
		vs = append(vs, v)
		h.count[latBucket(v)]++
		h.samples++
	}
	slices.Sort(vs)
	for _, q := range []float64{0.5, 0.99, 0.999} {
		exact := vs[int(q*float64(len(vs)))-1]
		got := h.quantile(q)
		if d := float64(got) - float64(exact); d < -float64(exact)/60 || d > float64(exact)/60 {
			t.Errorf("quantile %.3f: %d, exact %d", q, got, exact)
		}
	}
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1 << 20, 1<<20 + 12345, 1 << 36} {
		i := latBucket(v)
		if lo, hi := latValue(i), latValue(i+1); v+(v>>6) < lo || v > hi {
			t.Errorf("value %d: bucket %d middle %d, next %d", v, i, lo, hi)
		}
	}
	if latBucket(1<<62) != latBuckets-1 {
		t.Errorf("a huge value is not clamped into the last bucket")
	}
}

// TestLatHistObserve: a stamped frame is counted with its delay, an
// unstamped or short one is not, a stamp from the future is negative.
func TestLatHistObserve(t *testing.T) {
	h := &latHist{now: 1_000_000}
	frame := func(magic uint32, sent int64) []byte {
		b := make([]byte, stampEnd)
		binary.BigEndian.PutUint32(b[stampOff:], magic)
		binary.BigEndian.PutUint64(b[stampOff+16:], uint64(sent))
		return b
	}
	h.observe(frame(stampMagic, 1_000_000-5000))
	h.observe(frame(0x584b4731, 0))              // unstamped payload
	h.observe(frame(stampMagic, 0)[:stampEnd-1]) // too short
	h.observe(frame(stampMagic, 2_000_000))      // sent after now
	if h.samples != 1 || h.negative != 1 || h.max != 5000 {
		t.Fatalf("samples %d negative %d max %d, want 1, 1, 5000", h.samples, h.negative, h.max)
	}
	if q := h.quantile(0.5); q < 4900 || q > 5100 {
		t.Errorf("p50 %d, want about 5000", q)
	}
	h.endRound()
	if h.now != 0 {
		t.Errorf("endRound kept the receive time")
	}
}

// TestLatHistBatch: the receive time is read again for every batch a
// round takes off the ring (every h.batch packets), not kept for the
// round.
func TestLatHistBatch(t *testing.T) {
	h := &latHist{now: 1_000, batch: 2}
	b := make([]byte, stampEnd)
	binary.BigEndian.PutUint32(b[stampOff:], stampMagic)
	h.observe(b)
	h.observe(b)
	if h.now != 1_000 {
		t.Fatalf("receive time %d within the first batch, want 1000 kept", h.now)
	}
	h.observe(b) // the second batch's first packet
	if h.now <= 1_000 {
		t.Errorf("receive time %d in the second batch: not read again", h.now)
	}
	h.endRound()
	if h.now != 0 || h.seen != 0 {
		t.Errorf("endRound kept now %d, seen %d", h.now, h.seen)
	}
}

// TestLatHistJSON: the fields the harness reads, with the deciles p10 to
// p90 in order, the fifth equal to p50.
func TestLatHistJSON(t *testing.T) {
	h := &latHist{}
	for v := range uint64(1000) {
		h.count[latBucket(v*100)]++
		h.samples++
	}
	var b strings.Builder
	b.WriteString(`{"mode":"rxdrop"`)
	h.json(&b, time.Second)
	b.WriteString("}")
	var got struct {
		P50     uint64   `json:"lat_p50_ns"`
		Deciles []uint64 `json:"lat_deciles_ns"`
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if len(got.Deciles) != 9 || !slices.IsSorted(got.Deciles) || got.Deciles[4] != got.P50 {
		t.Fatalf("deciles %v, p50 %d: want 9 in order, the fifth the p50", got.Deciles, got.P50)
	}
	for i, d := range got.Deciles {
		if want := h.quantile(float64(i+1) / 10); d != want {
			t.Errorf("decile %d: %d, want %d", i+1, d, want)
		}
	}
}
