package rxpath

import (
	"testing"
	"time"
)

// testChances is how many empty rounds a test offers the governor.
const testChances = 128

// TestNapTimer: a nap's timer is Config.Coalesce (by default napFactor
// SleepCosts) cut to the delay budget (Config.MaxDelay, or an explicit
// Coalesce where MaxDelay is 0); with neither (the default), a negative
// budget or a negative Coalesce the Poller never naps, and NapTime is
// then not negative.
func TestNapTimer(t *testing.T) {
	const sc = 20 * time.Microsecond
	for _, c := range []struct {
		coalesce, maxDelay, want time.Duration
	}{
		{0, 0, 0},
		{0, time.Millisecond, napFactor * sc},
		{0, 30 * time.Microsecond, 30 * time.Microsecond},
		{500 * time.Microsecond, 0, 500 * time.Microsecond},
		{5 * time.Microsecond, 0, 5 * time.Microsecond},
		{500 * time.Microsecond, 30 * time.Microsecond, 30 * time.Microsecond},
		{500 * time.Microsecond, time.Millisecond, 500 * time.Microsecond},
		{0, -1, 0},
		{-1, 0, 0},
	} {
		g := &governor{}
		g.configure(&Config{Coalesce: c.coalesce, MaxDelay: c.maxDelay})
		g.start(sc)
		if got := time.Duration(g.napSpec.Value.Nano()); got != c.want {
			t.Errorf("Coalesce %v, MaxDelay %v: nap timer %v, want %v", c.coalesce, c.maxDelay, got, c.want)
		}
		if g.napLen < 0 {
			t.Errorf("Coalesce %v, MaxDelay %v: NapTime %v, want not negative", c.coalesce, c.maxDelay, g.napLen)
		}
		naps := false
		g.lastPkt, g.gap = 10*time.Millisecond, time.Microsecond
		for i := range testChances {
			naps = naps || g.decide(g.lastPkt+time.Microsecond, i+1) == actNap
		}
		if naps != (c.want > 0) {
			t.Errorf("Coalesce %v, MaxDelay %v: naps %v, want %v", c.coalesce, c.maxDelay, naps, c.want > 0)
		}
	}
}

// TestSleepCPUClockCost: a sleep timed on the process's CPU clock counts
// what it cost less what the clock's reads add (clockCost), for sleeps
// and naps alike; and cpuClockCost measures a read as dearer than nothing
// and cheaper than a millisecond where the clock can be read.
func TestSleepCPUClockCost(t *testing.T) {
	const sc, read, cost = 20 * time.Microsecond, 1500 * time.Nanosecond, 5 * time.Microsecond
	saved := processCPU
	defer func() { processCPU = saved }()
	const cpu0 = time.Second
	processCPU = func() time.Duration { return cpu0 + cost + read }
	g := &governor{}
	g.configure(&Config{})
	g.start(sc)
	g.clockCost = read
	g.blocked, g.sleptAt = true, time.Millisecond
	g.sleepEnd(true, g.sleptAt+sc, cpu0)
	if g.sleepCPU != cost {
		t.Errorf("a sleep that cost %v, timed by reads that add %v: SleepCPU %v", cost, read, g.sleepCPU)
	}
	g.napEnd(sc, cpu0)
	if g.napCost != cost {
		t.Errorf("a nap that cost %v, timed by reads that add %v: NapCost %v", cost, read, g.napCost)
	}
	// Two reads back to back can return the same time where the clock is
	// coarser than a system call (as in an emulated guest): no cost, 0.
	if rawProcessCPU() != 0 {
		if c := cpuClockCost(); c < 0 || c >= time.Millisecond {
			t.Errorf("cpuClockCost %v", c)
		}
	}
}

// TestFlowWokeArrival: an arrival that woke the poller from a sleep that
// blocked is dated one wake-up before the wake: a flow sleep's (flowCost)
// after a flow sleep, a SleepCost after a sleep in the runtime's poller.
// Dated a SleepCost before the wake from a flow sleep, whose wake-up is
// shorter, the idle period would look shorter than it was.
func TestFlowWokeArrival(t *testing.T) {
	const sc, flow = 20 * time.Microsecond, 5 * time.Microsecond
	const last, slept, woke = 100 * time.Microsecond, 102 * time.Microsecond, 130 * time.Microsecond
	for _, c := range []struct {
		flowWoke bool
		want     time.Duration // the idle period: the arrival less the last packet
	}{
		{true, woke - flow - last},
		{false, woke - sc - last},
	} {
		g := &governor{}
		g.configure(&Config{})
		g.start(sc)
		g.flowCost, g.flowWoke = flow, c.flowWoke
		g.lastPkt, g.lastEmpty, g.sleptAt, g.wokeAt, g.blocked = last, true, slept, woke, true
		g.arrived(woke)
		if got := 4 * g.gap; got != c.want {
			t.Errorf("flow sleep %v: idle period %v, want %v", c.flowWoke, got, c.want)
		}
	}
	// A new Run has had no sleep yet: not one from the last Run's.
	g := &governor{flowWoke: true}
	g.configure(&Config{})
	if g.start(sc); g.flowWoke {
		t.Error("a new Run's governor takes the last Run's sleep for a flow sleep")
	}
}

// TestFlowSpinLimit: after a flow sleep a sleep is weighed by its CPU and
// its wake-up's delay (flowCost), after one in the runtime's poller by its
// CPU alone, the limit staying within a sleep's CPU either way: with half
// the periods 0.9µs and half 600µs, and 1.5µs sleeps, polling the short
// ones costs more CPU than sleeping through them (a 1µs limit is also
// paid on every long one), less once a 6µs wake-up counts.
func TestFlowSpinLimit(t *testing.T) {
	const us = time.Microsecond
	for _, c := range []struct {
		flowWoke bool
		want     time.Duration
	}{{false, 0}, {true, us}} {
		g := &governor{}
		g.configure(&Config{})
		g.start(50 * us)
		g.sleepCPU, g.flowCost, g.flowWoke = 1500*time.Nanosecond, 6*us, c.flowWoke
		at := 10 * time.Millisecond
		for i := range spinEvery {
			x := 900 * time.Nanosecond
			if i%2 == 1 {
				x = 600 * us
			}
			g.lastPkt = at
			g.idleEnded(at + x)
			at += time.Millisecond
		}
		if g.spinLimit != c.want {
			t.Errorf("flow sleep %v: spin limit %v, want %v", c.flowWoke, g.spinLimit, c.want)
		}
	}
}
