package main

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// rxdrop --latency: the one-way delay of xdpgen -timestamp's (or xdpbench
// --stamp's) packets, as xdpbench --latency measures it. A stamped UDP/IPv4 payload starts with
// the magic "XKT1", and the send time (CLOCK_TAI ns, big-endian) follows
// the payload's 16-byte header. The receive time is CLOCK_TAI read when
// the handler sees the first packet of each batch the poller takes from
// the RX ring (of a round's first, and again every -b packets of a round
// that takes more: the poller's Weight), as xdpbench reads it once per
// batch. The
// histogram is xdpbench's: exact below 64 ns, then 64 buckets per power
// of two (under 1.6% error), allocated once.
const (
	stampOff   = ethLen + ipLen + udpLen // the UDP payload of an untagged IPv4 frame
	stampMagic = 0x584b5431              // "XKT1" (apps/internal/payload.MagicStamped)
	stampEnd   = stampOff + 16 + 8
	latSub     = 64
	latExpMax  = 36
	latBuckets = latSub + (latExpMax-5)*latSub
)

// latHist is a histogram of delays in ns.
type latHist struct {
	count             [latBuckets]uint64
	samples, negative uint64
	max               uint64
	taiOffset         int64 // CLOCK_TAI - CLOCK_REALTIME, ns
	now               int64 // the batch's receive time (0: not read yet)
	batch             int   // packets per batch (the poller's Weight); 0: one batch a round
	seen              int   // packets this round
}

func latBucket(v uint64) int {
	if v < latSub {
		return int(v)
	}
	e := bits.Len64(v) - 1
	if e > latExpMax {
		return latBuckets - 1
	}
	return latSub + (e-6)*latSub + int(v>>(e-6)) - latSub
}

// latValue is the middle of bucket i.
func latValue(i int) uint64 {
	if i < latSub {
		return uint64(i)
	}
	e := (i-latSub)/latSub + 6
	m := uint64((i-latSub)%latSub + latSub)
	return m<<(e-6) + (uint64(1)<<(e-6))>>1
}

// quantile is the value at q (0..1): the middle of the bucket that holds
// the ceil(q*samples)-th smallest sample; 0 without samples.
func (h *latHist) quantile(q float64) uint64 {
	if h.samples == 0 {
		return 0
	}
	rank := uint64(q * float64(h.samples))
	if float64(rank) < q*float64(h.samples) {
		rank++
	}
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.count {
		seen += c
		if seen >= rank {
			return latValue(i)
		}
	}
	return 0
}

// taiOffset is CLOCK_TAI - CLOCK_REALTIME, read once: time.Now is the
// vDSO's, and the offset changes only when the kernel's TAI offset is set.
func taiOffset() int64 {
	var tai unix.Timespec
	if unix.ClockGettime(unix.CLOCK_TAI, &tai) != nil {
		return 0
	}
	d := tai.Nano() - time.Now().UnixNano()
	return (d + sign(d)*int64(time.Second)/2) / int64(time.Second) * int64(time.Second)
}

func sign(d int64) int64 {
	if d < 0 {
		return -1
	}
	return 1
}

// observe records the delay of frame b, if it carries a stamp.
func (h *latHist) observe(b []byte) {
	if h.batch > 0 && h.seen > 0 && h.seen%h.batch == 0 {
		h.now = 0 // a new batch off the ring: its own receive time
	}
	h.seen++
	if len(b) < stampEnd || binary.BigEndian.Uint32(b[stampOff:]) != stampMagic {
		return
	}
	if h.now == 0 {
		h.now = time.Now().UnixNano() + h.taiOffset
	}
	sent := int64(binary.BigEndian.Uint64(b[stampOff+16:]))
	if sent > h.now {
		h.negative++
		return
	}
	d := uint64(h.now - sent)
	h.count[latBucket(d)]++
	h.samples++
	h.max = max(h.max, d)
}

// endRound forgets the round's receive time.
func (h *latHist) endRound() { h.now, h.seen = 0, 0 }

// processCPU is the process's CPU time (CLOCK_PROCESS_CPUTIME_ID).
func processCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// json is the fields xdpbench --latency adds to its line, with cpu the
// process's CPU time over the run.
func (h *latHist) json(b *strings.Builder, cpu time.Duration) {
	fmt.Fprintf(b, `,"lat_samples":%d,"lat_negative":%d,"lat_p50_ns":%d,"lat_p99_ns":%d,"lat_p999_ns":%d,"lat_max_ns":%d,"cpu_ns":%d`,
		h.samples, h.negative, h.quantile(0.5), h.quantile(0.99), h.quantile(0.999), h.max, cpu.Nanoseconds())
	// The deciles, p10 to p90: where a stream's packets split between
	// those a sleeping receiver's wake-up delayed and the others.
	b.WriteString(`,"lat_deciles_ns":[`)
	for i := 1; i <= 9; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, "%d", h.quantile(float64(i)/10))
	}
	b.WriteByte(']')
}
