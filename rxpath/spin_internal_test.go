package rxpath

import (
	"testing"
	"time"
)

const us = time.Microsecond

// period is a share of idle periods of one length.
type period struct {
	x time.Duration
	n int
}

// TestSpinLimit: the limit is the one that would have cost the periods
// seen least, a period within it costing its length and a longer one the
// limit plus a sleep's CPU, among 0 and the buckets' bounds up to most.
func TestSpinLimit(t *testing.T) {
	for _, c := range []struct {
		name        string
		periods     []period
		sleep, most time.Duration
		want        time.Duration
	}{
		{"none", nil, 8 * us, 16 * us, 0},
		{"short gaps", []period{{1 * us, 64}}, 8 * us, 16 * us, 2 * us},
		{"long gaps", []period{{600 * us, 64}}, 8 * us, 16 * us, 0},
		// A paced sender's bursts: gaps within a burst and between them.
		// Polling for 2 µs costs 0.8*1 + 0.2*(2+8) µs a period on
		// average, sleeping at once 8.
		{"bursts", []period{{1 * us, 51}, {600 * us, 13}}, 8 * us, 16 * us, 2 * us},
		// Half the periods long and sleeps cheap: 0.5*1 + 0.5*(2+2) =
		// 2.5 µs against 2.
		{"cheap sleeps", []period{{1 * us, 32}, {600 * us, 32}}, 2 * us, 4 * us, 0},
		// Gaps longer than a sleep costs are slept through.
		{"gaps above a sleep", []period{{12 * us, 64}}, 8 * us, 16 * us, 0},
		{"gaps below a sleep", []period{{12 * us, 64}}, 20 * us, 40 * us, 16 * us},
		{"bound by most", []period{{12 * us, 64}}, 20 * us, 8 * us, 0},
		// A period as long as a bound is not within it.
		{"at a bound", []period{{2 * us, 64}}, 8 * us, 16 * us, 4 * us},
	} {
		var h spinHist
		for _, p := range c.periods {
			for range p.n {
				h.add(p.x)
			}
		}
		if got := h.limit(c.sleep, c.most); got != c.want {
			t.Errorf("%s: limit %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSpinDecay: each decision halves the counts, so that recent periods
// weigh more. 64 long periods, then 32 short ones: with the long ones
// halved, polling for 2 µs costs 32*1 + 32*(2+4) µs against 64*4 for
// sleeping at once; with them whole, 32*1 + 64*6 against 96*4.
func TestSpinDecay(t *testing.T) {
	var h spinHist
	for range 64 {
		h.add(600 * us)
	}
	if got := h.limit(4*us, 8*us); got != 0 {
		t.Fatalf("after long periods: limit %v, want 0", got)
	}
	for range 32 {
		h.add(1 * us)
	}
	if got := h.limit(4*us, 8*us); got != 2*us {
		t.Errorf("after 32 short periods: limit %v, want 2µs", got)
	}
}

// TestSpinRule: the poller counts idle periods as they end, decides the
// limit every spinEvery'th (with a sleep taken to cost a SleepCost while
// none was timed), and polls again
// only within it. After a sleep a period lasts at least until the round
// before the sleep began, however soon the wake-up less a SleepCost would
// put the packet.
func TestSpinRule(t *testing.T) {
	p := testPoller(Config{}, governor{sleepCost: 50 * us})
	at := 10 * time.Millisecond
	periods := func(n int, x time.Duration, slept bool) {
		for range n {
			p.lastPkt, p.wokeAt, p.sleptAt = at, 0, 0
			arrival := at + x
			if slept {
				// Slept at once; the wake-up less a SleepCost puts
				// the packet no later than the last one.
				p.sleptAt, p.wokeAt = at+x, at+x+us
				arrival = at
			}
			p.idleEnded(arrival)
			at += x + time.Millisecond
		}
	}
	periods(spinEvery, us, false)
	if p.spinLimit != 2*us {
		t.Fatalf("limit %v with no sleep timed (a sleep taken to cost a SleepCost), want 2µs", p.spinLimit)
	}
	p.sleepCPU = 8 * us
	periods(spinEvery, us, false)
	if p.spinLimit != 2*us {
		t.Fatalf("after short periods: limit %v, want 2µs", p.spinLimit)
	}
	p.lastPkt, p.awakeSince = at, at
	if !p.keepPolling(at+us, 1) || p.keepPolling(at+2*us, 1) {
		t.Errorf("limit 2µs: polls again at 1µs %v (want true), at 2µs %v (want false)",
			p.keepPolling(at+us, 1), p.keepPolling(at+2*us, 1))
	}
	// The duty rule: awake for dutySpin SleepCosts, the poller sleeps
	// even within the spin limit.
	p.awakeSince = at + us - dutySpin*p.sleepCost
	if p.keepPolling(at+us, 1) {
		t.Errorf("polls again after %v awake (SleepCost %v)", dutySpin*p.sleepCost, p.sleepCost)
	}
	p.awakeSince = at
	p.calmUntil = at + time.Second
	if p.keepPolling(at+us, 1) {
		t.Error("polls again while calm (another task wants the CPU)")
	}
	p.calmUntil = 0
	// Long periods slept through, whose packets the wake-up would place
	// at the last packet: after three decisions, 112 of them (halved as
	// they came) outweigh the 16 short ones left.
	periods(3*spinEvery, 600*us, true)
	if p.spinLimit != 0 {
		t.Errorf("after long periods slept through: limit %v, want 0", p.spinLimit)
	}
	// Never longer than a wake-up takes (SleepCost), however dear a
	// sleep.
	p.sleepCost, p.sleepCPU = us, 40*us
	periods(spinEvery, us, false)
	if p.spinLimit != 0 {
		t.Errorf("SleepCost 1µs: limit %v, want 0 (1µs periods need a 2µs limit)", p.spinLimit)
	}
	// Nor longer than a sleep costs (SleepCPU): 5µs periods with 7µs
	// sleeps would cost least polled through with an 8µs limit, by the
	// rule's reckoning, which leaves out what a wake-up gathers.
	p.spin, p.sleepCost, p.sleepCPU = spinHist{}, 50*us, 7*us
	periods(spinEvery, 5*us, false)
	if p.spinLimit != 0 {
		t.Errorf("SleepCPU 7µs, periods of 5µs: limit %v, want 0 (the bounds up to 7µs: 4µs costs more than a sleep at once)", p.spinLimit)
	}
	for _, cfg := range []Config{{IdleRounds: -1}, {IdleRounds: 2}, {Spin: true}} {
		q := testPoller(cfg, governor{spinLimit: time.Second})
		if got := q.keepPolling(at+us, 3); got && !cfg.Spin {
			t.Errorf("IdleRounds %d: polls again a third time", cfg.IdleRounds)
		}
		// Nor is the rule's state kept for them.
		q = testPoller(cfg, governor{sleepCost: 50 * us})
		for range spinEvery {
			q.lastPkt, q.lastEmpty = at, true
			q.arrived(at + us)
			at += time.Millisecond
		}
		if q.spin.seen != 0 || q.spinLimit != 0 {
			t.Errorf("%+v: %d idle periods counted, limit %v", cfg, q.spin.seen, q.spinLimit)
		}
	}
}

// TestArrivedIdle: an arrival after empty rounds ends an idle period,
// counted for the spin rule from the last packet: to the arrival after a
// spin; after a sleep that blocked, to the wake-up less a SleepCost but
// no earlier than the sleep's start; after one that did not, to the
// wake-up. Not after a nap, nor where an empty Fill ring forced a sleep.
func TestArrivedIdle(t *testing.T) {
	const last = 10 * time.Millisecond
	for _, c := range []struct {
		name            string
		wokeAt, sleptAt time.Duration
		blocked, napped bool
		starved         bool
		bucket          int // -1: not counted
	}{
		{name: "spin", bucket: 4}, // 3µs
		{name: "sleep", wokeAt: last + 60*us, sleptAt: last + us, blocked: true, bucket: 6},                  // 10µs
		{name: "sleep from its start", wokeAt: last + 52*us, sleptAt: last + 7*us, blocked: true, bucket: 5}, // 7µs, not 2
		{name: "sleep that did not block", wokeAt: last + 20*us, sleptAt: last + us, bucket: 7},              // 20µs
		{name: "nap", napped: true, bucket: -1},
		{name: "starved", starved: true, bucket: -1},
	} {
		p := testPoller(Config{}, governor{sleepCost: 50 * us, lastPkt: last, lastEmpty: true})
		p.wokeAt, p.sleptAt, p.blocked, p.idleStarved = c.wokeAt, c.sleptAt, c.blocked, c.starved
		if c.napped {
			p.nappedAt = last + us
		}
		p.arrived(last + 3*us)
		got := -1
		for k, n := range p.spin.n {
			if n > 0 {
				got = k
			}
		}
		if got != c.bucket || p.spin.seen > 1 {
			t.Errorf("%s: counted in bucket %d (%d periods), want %d", c.name, got, p.spin.seen, c.bucket)
		}
		if p.idleStarved || p.lastPkt != last+3*us {
			t.Errorf("%s: starved %v, last packet %v after the arrival", c.name, p.idleStarved, p.lastPkt)
		}
	}
}

// TestSleepTimed: which sleeps are timed for SleepCPU, and which of
// those count: one that blocked without yielding, lasted from half a
// SleepCost to sleepWallMax of them, and took at most half its wall time
// in CPU. It is the least of the last sleepKeep.
func TestSleepTimed(t *testing.T) {
	for _, c := range []struct {
		sleeps, timed uint64
		idleRounds    int
		want          bool
	}{
		{0, 0, 0, true},
		{1, 0, 0, true}, // none counted yet
		{1, 1, 0, false},
		{sleepSample, 1, 0, true},
		{sleepSample*sleepKeep - 1, 0, 0, true},
		{sleepSample*sleepKeep + 1, 0, 0, false}, // not every one for ever
		{0, 0, -1, false},                        // no spin rule
	} {
		p := testPoller(Config{IdleRounds: c.idleRounds}, governor{sleepTimed: c.timed})
		if got := p.timeSleep(c.sleeps); got != c.want {
			t.Errorf("sleeps %d, %d counted, IdleRounds %d: timed %v, want %v", c.sleeps, c.timed, c.idleRounds, got, c.want)
		}
	}
	p := testPoller(Config{}, governor{sleepCost: 50 * us})
	p.sleptFor(3*us, 50*us) // did not block
	p.blocked, p.yielded = true, true
	p.sleptFor(3*us, 50*us) // yielded first
	p.yielded = false
	p.sleptFor(30*us, 50*us) // other threads ran alongside
	p.sleptFor(3*us, 10*us)  // shorter than a wake-up
	p.sleptFor(3*us, 300*us) // longer than sleepWallMax SleepCosts
	p.sleptFor(0, 50*us)
	p.sleptFor(12*us, 25*us-1) // just under half a SleepCost
	p.sleptFor(3*us, 200*us+1) // just over sleepWallMax SleepCosts
	p.sleptFor(13*us, 25*us)   // just over half its wall time
	if p.sleepCPU != 0 || p.sleepTimed != 0 {
		t.Fatalf("SleepCPU %v (%d counted) from samples that do not count", p.sleepCPU, p.sleepTimed)
	}
	for _, s := range []struct{ c, w time.Duration }{{12 * us, 25 * us}, {3 * us, 200 * us}, {25 * us, 50 * us}} {
		q := testPoller(Config{}, governor{sleepCost: 50 * us, blocked: true})
		q.sleptFor(s.c, s.w)
		if q.sleepCPU != s.c {
			t.Errorf("a sample of %v in %v at the bounds: SleepCPU %v", s.c, s.w, q.sleepCPU)
		}
	}
	p.sleptFor(3*us, 50*us)
	for i := range sleepKeep {
		p.sleptFor(10*us, 50*us)
		want := 3 * us
		if i == sleepKeep-1 {
			want = 10 * us
		}
		if p.sleepCPU != want {
			t.Errorf("after %d samples of 10µs: SleepCPU %v, want %v", i+1, p.sleepCPU, want)
		}
	}
}

// TestLowMean: a sample below the estimate is taken, one above moves it
// by a sixteenth.
func TestLowMean(t *testing.T) {
	for _, c := range []struct{ est, c, want time.Duration }{
		{0, 5 * us, 5 * us},
		{8 * us, 5 * us, 5 * us},
		{8 * us, 24 * us, 9 * us},
	} {
		if got := lowMean(c.est, c.c); got != c.want {
			t.Errorf("lowMean(%v, %v) = %v, want %v", c.est, c.c, got, c.want)
		}
	}
}

// testPoller is a Poller with cfg whose governor starts as g.
func testPoller(cfg Config, g governor) *Poller {
	p := &Poller{cfg: cfg, governor: g}
	p.governor.configure(&p.cfg)
	return p
}
