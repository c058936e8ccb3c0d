package rxpath

import (
	"time"

	"golang.org/x/sys/unix"
)

// The governor is the Poller's idle policy, apart from the receive loop
// (as the kernel's cpuidle governors are apart from the idle loop): the
// loop tells it what happened (a round began, a round took packets or
// none, a nap or a sleep began and ended, what either cost) and, after
// every empty round, asks it what to do next (decide): poll again, nap,
// or sleep until a socket is readable. Its state is this struct; times
// are offsets from Run's start. The package documentation states the
// policy; the spin rule is in spin.go.

// action is the governor's answer after an empty round.
type action int

const (
	actSleep action = iota // sleep until a socket is readable
	actPoll                // poll again at once (a spin)
	actNap                 // nap for the timer, then poll
)

// govCounters are the governor's decisions, for Stats.
type govCounters struct {
	spins, preempted, naps, napsEmpty uint64
	clockReads                        uint64 // reads of the process's CPU clock (system calls)
}

// governor is the idle policy's state; see the package documentation.
type governor struct {
	// From Config: IdleRounds, Spin, Coalesce, MaxDelay.
	idleRounds int
	spinning   bool
	coalesce   time.Duration
	maxDelay   time.Duration

	n govCounters

	sleepCost time.Duration // SleepCost(), read at Run's start
	// flowCost: a flow sleep's wake-up (flowSleepCost; 0 with
	// Config.RuntimeSleep); flowWoke: the last sleep a socket ended was one.
	flowCost time.Duration
	flowWoke bool
	budget   time.Duration   // the delay budget (MaxDelay, or an explicit Coalesce; 0: none), set with the timer
	napSpec  unix.ItimerSpec // the nap's timer

	lastPkt   time.Duration // when the last round that took packets began
	gap       time.Duration // expected wait for the next packet (moving average)
	dev       time.Duration // its mean deviation (moving average)
	prevRound time.Duration // when the previous round began
	spun      bool          // the previous round was an empty one polled again
	calmUntil time.Duration // the poller does not poll an empty ring again before this
	lastEmpty bool          // the previous round took nothing (or was a sleep)
	wokeAt    time.Duration // when the last sleep ended, if the round after it is next
	nappedAt  time.Duration // when the last nap began, if the round after it is next
	napLen    time.Duration // how long a nap lasts (moving average; the timer at first)
	napCost   time.Duration // the CPU time of a nap (moving average of samples; 0: none yet)
	probeAt   time.Duration // no probe nap before this (see probe)
	// The duty rule (see keepPolling): when the poller last woke from a
	// sleep or a nap (or Run began), and whether the round to come is
	// the first after one.
	awakeSince time.Duration
	rested     bool
	sleepLen   time.Duration // how long the last sleep a socket ended lasted (at most sleepWallMax SleepCosts)
	// The spin rule (spin.go): the idle periods seen, the limit they gave,
	// a sleep's CPU (least of the samples; 0: none yet). sleptAt: the
	// round before the last sleep began; blocked: that sleep waited;
	// yielded: it ran other goroutines first (the flow sleep);
	// idleStarved: an empty Fill ring forced a sleep since the last packet.
	spin        spinHist
	spinLimit   time.Duration
	sleepCPU    time.Duration
	sleepCPUs   [sleepKeep]time.Duration
	clockCost   time.Duration // what a read of the CPU clock adds to a span it times (cpuClockCost)
	sleepTimed  uint64
	sleptAt     time.Duration
	blocked     bool
	yielded     bool
	idleStarved bool
}

// configure takes the governor's settings from c.
func (g *governor) configure(c *Config) {
	g.idleRounds, g.spinning, g.coalesce, g.maxDelay = c.IdleRounds, c.Spin, c.Coalesce, c.MaxDelay
}

// start begins a Run: the state relative to its start goes, what was
// measured stays (but not a nap overrun measured with another timer).
func (g *governor) start(sleepCost time.Duration) {
	g.sleepCost = sleepCost
	g.lastPkt = 0
	g.gap, g.dev, g.prevRound, g.spun, g.calmUntil, g.lastEmpty, g.wokeAt, g.sleptAt = 0, 0, 0, false, 0, false, 0, 0
	g.nappedAt, g.probeAt, g.awakeSince, g.rested, g.sleepLen = 0, 0, 0, false, 0
	g.flowWoke = false // no sleep yet in this Run
	nap := g.napTimer()
	g.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(max(nap, 0)))}
	if g.napLen == 0 || g.napLen > g.napOverrunAt() {
		// Measured from the first nap on and kept across Runs, but not
		// an overrun from an earlier Run's contended CPU: this Run's
		// timer comes from a fresh SleepCost.
		g.napLen = max(nap, 0)
	}
}

// napTimer sets the delay budget (Config.MaxDelay, or an explicit
// Config.Coalesce where MaxDelay is 0; none by default) and returns the
// nap's timer: Config.Coalesce (by default napFactor SleepCosts) within
// the budget; negative if the Poller does not nap.
func (g *governor) napTimer() time.Duration {
	g.budget = g.maxDelay
	if g.budget == 0 {
		// An explicit Coalesce is the nap asked for, and its budget.
		g.budget = max(g.coalesce, 0)
	}
	if g.budget <= 0 {
		return -1
	}
	nap := g.coalesce
	if nap == 0 {
		nap = napFactor * g.sleepCost
	}
	return min(nap, g.budget)
}

// roundStart is told of a round about to begin at now (a clock reading).
func (g *governor) roundStart(now time.Duration) {
	if g.spun && now-g.prevRound > preemptedAfter*g.sleepCost {
		// Descheduled while polling an empty ring: another task wants
		// this CPU. Polling then only lowers the poller's claim on it
		// (the scheduler favours a task that slept), so sleep at once
		// for a while.
		g.n.preempted++
		g.calmUntil = now + calmFor*g.sleepCost
	}
	if g.rested {
		g.awakeSince, g.rested = now, false
	}
	g.prevRound = now
}

// wantsClock reports whether roundEnd needs the time of a round that
// took got packets: at an arrival and at the first empty round after
// packets.
func (g *governor) wantsClock(got int) bool { return (got > 0) == g.lastEmpty }

// roundEnd is told of a round, begun at now (when wantsClock), that took
// got packets.
func (g *governor) roundEnd(now time.Duration, got int) {
	switch {
	case got > 0 && g.lastEmpty:
		g.arrived(now)
	case got == 0 && !g.lastEmpty:
		// The packets of the round before were the last so far.
		g.prevRound, g.lastPkt = now, now
	}
	if g.nappedAt > 0 && got == 0 {
		g.n.napsEmpty++
	}
	g.lastEmpty, g.wokeAt, g.nappedAt = got == 0, 0, 0
}

// decide answers, after the idle'th empty round in a row, begun at now,
// what to do next.
func (g *governor) decide(now time.Duration, idle int) action {
	if g.napNow(now) {
		g.rested = true
		return actNap
	}
	if g.keepPolling(now, idle) {
		g.n.spins++
		g.spun = true
		return actPoll
	}
	g.rested = true
	return actSleep
}

// napBegin is told of a nap beginning at now. It returns the CPU time to
// time the nap from, 0 if it is not timed: every napSample'th nap, and
// every one while naps cost what they last.
func (g *governor) napBegin(now time.Duration) time.Duration {
	g.nappedAt = now
	if g.n.naps%napSample != 0 && g.napCost < g.napLen {
		return 0
	}
	g.n.clockReads++
	return processCPU() // 0: the clock could not be read
}

// napEnd is told of a nap that lasted d, timed from cpu0 (napBegin).
func (g *governor) napEnd(d, cpu0 time.Duration) {
	if cpu0 > 0 {
		g.n.clockReads++
		if c := processCPU() - cpu0 - g.clockCost; c > 0 {
			g.napCost = lowMean(g.napCost, c)
		}
	}
	if g.n.naps == 0 {
		g.napLen = d
	}
	g.n.naps++
	g.napLen += (d - g.napLen) / 8
}

// sleepBegin is told of a sleep about to begin after a round begun at
// now, the Poller's sleeps'th; starved if an empty Fill ring forces it.
// It returns the process's CPU time to time the sleep from, 0 if it is
// not timed (see timeSleep).
func (g *governor) sleepBegin(now time.Duration, starved bool, sleeps uint64) (cpu0 time.Duration) {
	g.sleptAt = now
	if starved {
		// Forced by an empty Fill ring, not chosen: it is not timed,
		// nor is the idle period it falls in counted.
		g.idleStarved = true
		return 0
	}
	if !g.timeSleep(sleeps) {
		return 0
	}
	g.n.clockReads++
	return processCPU()
}

// sleepEnd is told of the end of a sleep, at now if a socket ended it
// (woke), timed from cpu0 (sleepBegin).
func (g *governor) sleepEnd(woke bool, now, cpu0 time.Duration) {
	if !woke {
		return
	}
	g.wokeAt = now
	g.sleepLen = min(now-g.sleptAt, sleepWallMax*g.sleepCost)
	if cpu0 > 0 {
		// A sleep that a socket ended: what it cost against polling.
		g.n.clockReads++
		g.sleptFor(processCPU()-cpu0-g.clockCost, g.wokeAt-g.sleptAt)
	}
}

// arrived updates, after a round begun at now that took packets, the
// expected wait for the next packet: moving averages (weight 1/4) of the
// time between arrivals and of its deviation (as TCP estimates a
// round-trip time). Only a round after an empty one or a sleep sees an
// arrival (not one after a nap: it does not say when in the nap its
// packets came). After a spin the arrival was now; after a sleep that
// blocked, a wake-up before the wake (SleepCost; flowCost after a flow
// sleep); after one that did not, at the wake. A sample counts for at
// most twice the longer of a wake-up and a nap: one pause between bursts
// does not make the poller sleep through the next burst. The idle period
// that ended is counted for the spin rule (idleEnded), unless an empty
// Fill ring forced a sleep in it.
func (g *governor) arrived(now time.Duration) {
	if g.lastPkt > 0 && g.lastEmpty && g.nappedAt == 0 {
		at := now
		if g.wokeAt > 0 {
			at = g.wokeAt // a sleep that did not block: the packet was there
			if g.blocked {
				wake := g.sleepCost
				if g.flowWoke && g.flowCost > 0 {
					wake = g.flowCost
				}
				at = max(g.wokeAt-wake, g.lastPkt)
			}
		}
		if !g.idleStarved && g.adaptive() {
			g.idleEnded(at)
		}
		sample := min(at-g.lastPkt, 2*max(g.sleepCost, g.napLen))
		d := sample - g.gap
		g.gap += d / 4
		g.dev += (max(d, -d) - g.dev) / 4
	}
	g.lastPkt, g.idleStarved = now, false
}

// napNow decides, after an empty round begun at now, whether to nap:
// with a delay budget, Config.IdleRounds 0 and Config.Coalesce not
// negative, while packets flow (the expected gap to the next arrival
// plus its mean deviation, and the silence since the last packet,
// shorter than a nap lasts), naps end on time (NapTime within napOverrun
// times the timer, or the budget, plus two wake-ups) and, unless
// Coalesce is explicit, a nap costs less CPU than it lasts (NapCost <
// NapTime, both measured while running): a nap of length T costs
// NapCost for the T/gap packets it gathers.
func (g *governor) napNow(now time.Duration) bool {
	if !g.adaptive() || g.coalesce < 0 || g.napSpec.Value.Nano() <= 0 {
		return false
	}
	quiet := now - g.lastPkt
	if g.gap+g.dev >= g.napLen || quiet >= g.napLen {
		return false
	}
	if g.napLen > g.napOverrunAt() {
		// Naps end far later than their timer (NapTime): the CPU is
		// contended (on veth, by the softirq work of this very
		// traffic, ksoftirqd), and a nap that wakes late leaves the
		// RX ring unattended with its sockets out of the epoll set.
		// Measure again now and then.
		return g.probe(now)
	}
	if g.coalesce > 0 || g.napCost < g.napLen {
		// An explicit Coalesce naps whatever a nap costs: the cost is
		// measured on the process's CPU clock, which also counts other
		// threads (other pollers in the process, a TX loop) and can
		// look as long as the nap itself where they are busy.
		return true
	}
	// Naps cost what they last: measure again now and then.
	return g.probe(now)
}

// probe reports whether a nap the rules forgo is taken all the same, to
// measure again: one every napProbeGap NapTimes at most.
func (g *governor) probe(now time.Duration) bool {
	if now < g.probeAt {
		return false
	}
	g.probeAt = now + napProbeGap*g.napLen
	return true
}

// napProbeGap: see probe.
const napProbeGap = 256

// napOverrun: naps that last (NapTime, a moving average) more than
// napOverrun times their timer, or more than the delay budget, plus two
// wake-ups (SleepCost), are not taken, but to measure again: on a
// contended CPU a nap can last many times its timer, a packet waits on
// the ring meanwhile beyond the budget, and the ring overflows.
const napOverrun = 4

// napOverrunAt is the NapTime beyond which naps overrun (see napOverrun).
func (g *governor) napOverrunAt() time.Duration {
	t := time.Duration(g.napSpec.Value.Nano())
	limit := napOverrun * t
	if g.budget > 0 {
		limit = min(limit, max(g.budget, t))
	}
	return limit + 2*g.sleepCost
}

// lowMean moves est, a moving average biased low, towards the sample c:
// a sample below it (or the first) is taken as it is, one above it moves
// it by a sixteenth (NapCost: the process's CPU clock, which its samples
// read, also counts what other threads did meanwhile).
func lowMean(est, c time.Duration) time.Duration {
	if est == 0 || c < est {
		return c
	}
	return est + (c-est)/16
}

// napFactor: by default a nap lasts napFactor SleepCosts, so that its
// CPU cost (about a SleepCost where a short sleep costs what it lasts)
// is a small part of its length.
const napFactor = 4

// napSample: every napSample'th nap measures its CPU cost.
const napSample = 16

// adaptive reports whether the poller decides how to wait from
// measurement (Config.IdleRounds 0, not Spin): only then does it nap, time
// its rests and sleeps, and keep the spin rule's state.
func (g *governor) adaptive() bool { return g.idleRounds == 0 && !g.spinning }

// keepPolling decides, after the idle'th empty round in a row, begun at
// now, whether to poll again (true) or to sleep. With Config.IdleRounds 0
// it polls only while no other task was found to want the CPU (see
// preemptedAfter), the silence since the last packet is shorter than
// the spin limit (see spin.go), and the poller has been awake (since
// its last sleep or nap) for less than dutySpin times the longer of a
// SleepCost and the last sleep: the duty rule. Spin polls
// IdleRounds (64 by default) rounds between maintenance passes; a positive
// IdleRounds is a fixed count; a negative one sleeps at once.
func (g *governor) keepPolling(now time.Duration, idle int) bool {
	switch r := g.idleRounds; {
	case g.spinning:
		return idle <= max(r, spinRounds)
	case r > 0:
		return idle <= r
	case r < 0:
		return false
	}
	return now >= g.calmUntil && now-g.lastPkt < g.spinLimit && now-g.awakeSince < dutySpin*max(g.sleepCost, g.sleepLen)
}

// A round that begins more than preemptedAfter sleep costs after an empty
// round the poller polled again means the scheduler ran something else
// meanwhile; the poller then sleeps as soon as a round comes up empty for
// the next calmFor sleep costs (some scheduler time slices).
const (
	preemptedAfter = 10
	calmFor        = 1000
)
