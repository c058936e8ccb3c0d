package rxpath

import (
	"math/bits"
	"time"
)

// The spin rule. After an empty round that does not nap, a poller with
// Config.IdleRounds 0 polls again at once (a spin) only while the silence
// since the last packet is shorter than its spin limit, and otherwise
// sleeps until a socket is readable. Waiting is a ski rental: polling
// through an idle period costs its length in CPU, a sleep costs the CPU of
// a sleep and its wake-up (sleepCPU, measured while running), whatever the
// period's length. Polling for at most T and then sleeping costs an idle
// period of length x
//
//	x             if x < T (polled through),
//	T + sleepCPU  otherwise (polled for T, then slept).
//
// The poller counts the idle periods it sees by length (spinHist) and, every
// spinEvery'th period, takes for its limit the T, among 0 and the buckets'
// bounds up to sleepCPU and no longer than a sleep's wake-up takes
// (SleepCost: the bound of the rule before this one), that would have
// cost those periods least. Up to sleepCPU, not beyond: the cost above
// leaves out what a sleep saves after the arrival that ends it, when the
// packets that come during its wake-up are taken in one round with no
// idle periods between them, so it overstates a sleep's cost where
// packets come closer together than a wake-up takes; the bound keeps
// that error from making the poller poll gaps longer than a sleep costs.
// Traffic that comes in bursts (a paced sender's batches) has short gaps
// within a burst and long ones between bursts: the limit then covers the
// former and the poller sleeps through the latter at once, about one
// sleep per burst.
//
// An idle period runs from the first empty round after a round that took
// packets to the start of the next round that takes packets; after a
// sleep that blocked, to its wake-up less a SleepCost (after a flow sleep,
// less a flow sleep's wake-up, flowSleepCost), but no earlier
// than the start of the round before the sleep; after one that did not
// block (a packet came as it began), to its wake-up. One that ends after
// a nap is not counted (the nap's round does not say when in the nap its
// packets came), nor one in which an empty Fill ring forced a sleep (that
// is starvation, not an idle link). Only a poller with Config.IdleRounds
// 0, not Spin, counts them.
//
// In the flow sleep (see thread.go) a sleep is taken to cost its CPU and
// the delay its wake-up (flowSleepCost) adds to the packet that ends it,
// a microsecond of delay weighing as one of CPU: the poller polls through
// gaps a little longer where a sleep would make the next packet wait, and
// still sleeps through the long ones, as a C receiver that polls a few
// dozen empty rounds before poll(2) does (make bench's latency rows compare
// the two on both axes). A sleep in the runtime's poller
// (Config.RuntimeSleep, an idle poller, GOMAXPROCS 1) is weighed by its
// CPU alone: its wake-up is longer, and weighing its delay would make the
// poller poll through most gaps of a paced stream, at much more CPU per
// packet.
//
// sleepCPU is the least of the last sleepKeep samples, each the process's
// CPU time from just before a sleep to just after the wake-up a socket
// brought, less what the clock's reads add to it (cpuClockCost: a read is
// a system call), for every
// sleepSample'th sleep (see timeSleep). Only a sleep
// that blocked, short and cheap against its wall time, is a sample (see
// sleptFor): the process's CPU clock also counts other threads, which
// only ever add to a sample. Until one is, a sleep is taken to cost a
// SleepCost. Where other threads of the process keep every sample out or
// inflate them, the limit stays within SleepCost.

// spinHist is the distribution of idle periods: their count and total
// length (ns) by bucket, decayed by half at each decision. Bucket k holds
// periods shorter than spinBound(k) and, for k > 0, at least
// spinBound(k-1); the last bucket holds every longer period.
type spinHist struct {
	n, sum [spinBuckets]float64
	seen   uint64 // periods counted
}

// Buckets of spinHist: bounds from spinBase (250 ns) to 1.024 ms.
// spinEvery: periods between two decisions of the limit.
const (
	spinBuckets = 14
	spinBase    = 250 * time.Nanosecond
	spinEvery   = 64
)

// spinBound is the upper bound of bucket k, for k < spinBuckets-1.
func spinBound(k int) time.Duration { return spinBase << k }

// add counts an idle period of length x and reports whether the limit
// is due to be decided again.
func (h *spinHist) add(x time.Duration) bool {
	x = max(x, 0)
	k := min(bits.Len64(uint64(x/spinBase)), spinBuckets-1)
	h.n[k]++
	h.sum[k] += float64(x)
	h.seen++
	return h.seen%spinEvery == 0
}

// limit returns the spin limit that would have cost the counted periods
// least (see the spin rule) with a sleep costing sleep, among 0 and the
// buckets' bounds up to most, the shortest of equals; then it halves the
// counts, so that older periods weigh less.
func (h *spinHist) limit(sleep, most time.Duration) time.Duration {
	var total float64
	for _, n := range h.n {
		total += n
	}
	best, least := time.Duration(0), total*float64(sleep)
	var spun, ended float64 // length and count of the periods within t
	for k := 0; k < spinBuckets-1 && spinBound(k) <= most; k++ {
		t := spinBound(k)
		spun += h.sum[k]
		ended += h.n[k]
		if c := spun + (total-ended)*float64(t+sleep); c < least {
			best, least = t, c
		}
	}
	for k := range h.n {
		h.n[k] /= 2
		h.sum[k] /= 2
	}
	return best
}

// idleEnded counts an idle period that ended at arrival, and decides the
// spin limit again when that is due (with a sleep taken to cost a
// SleepCost until a sample counted).
func (g *governor) idleEnded(arrival time.Duration) {
	x := arrival - g.lastPkt
	if g.wokeAt > 0 {
		// The packet came no earlier than the sleep began: the poller
		// polled until then.
		x = max(x, g.sleptAt-g.lastPkt)
	}
	if g.spin.add(x) {
		s := g.sleepCPU
		if s == 0 {
			s = g.sleepCost // until a sample counted: the old rule's bound
		}
		cost := s
		if g.flowWoke && g.flowCost > 0 {
			// The flow sleep: its wake-up's delay counts as CPU (but
			// the limit stays within a sleep's CPU, as before).
			cost += g.flowCost
		}
		g.spinLimit = g.spin.limit(cost, min(s, g.sleepCost))
	}
}

// sleepSample: every sleepSample'th sleep (and every one of the Poller's
// first sleepSample*sleepKeep while none has counted) is timed on the
// process's CPU clock for sleepCPU, the least of the last sleepKeep
// samples.
// sleepWallMax: see sleptFor.
const (
	sleepSample  = 16
	sleepKeep    = 8
	sleepWallMax = 4
)

// timeSleep reports whether the sleep about to begin, the Poller's
// sleeps'th, chosen (not forced
// by an empty Fill ring), is to be timed for sleepCPU: every sleepSample'th,
// and every one of the first sleepSample*sleepKeep while no sample has
// counted.
func (g *governor) timeSleep(sleeps uint64) bool {
	return g.adaptive() && (sleeps%sleepSample == 0 ||
		g.sleepTimed == 0 && sleeps < sleepSample*sleepKeep)
}

// sleptFor counts a timed sleep that a socket ended, which took CPU time
// c and wall time w. It is a sample of sleepCPU if it blocked, did not
// yield, lasted at least half a SleepCost (a wake-up) and at most
// sleepWallMax SleepCosts, and took at most half its wall time in CPU:
// the process's CPU clock also counts other threads, which add to a
// sample in proportion to its length.
func (g *governor) sleptFor(c, w time.Duration) {
	if !g.blocked || g.yielded || c <= 0 || 2*c > w || 2*w < g.sleepCost || w > sleepWallMax*g.sleepCost {
		return
	}
	g.sleepCPUs[g.sleepTimed%sleepKeep] = c
	g.sleepTimed++
	least := c
	for _, s := range g.sleepCPUs {
		if s > 0 {
			least = min(least, s)
		}
	}
	g.sleepCPU = least
}

// dutySpin: the duty rule. A stream whose gaps are all within the spin
// limit would keep the poller polling without end, a whole CPU however
// few packets the gaps hold. After dutySpin times the longer of a
// SleepCost and its last sleep awake, the poller sleeps at the next
// empty round instead: the sleep costs a sleep's CPU and saves the
// polling of its wake-up, and the packets that arrive meanwhile, about
// one in dutySpin+1 of such a stream however late wake-ups come (the
// last sleep sets the period), wait for that wake-up. The others are
// taken as they arrive: the median packet of a steady stream waits no
// longer than with a poller that never sleeps.
const dutySpin = 3
