package main

import (
	"testing"
	"time"
)

// offer sends pps packets a second for d, one poll round every round,
// through p, and returns how many passed.
func offer(p *policer, start int64, pps float64, d, round time.Duration) (passed, total int, end int64) {
	now := start
	var owed float64
	for t := time.Duration(0); t < d; t += round {
		now = start + int64(t)
		p.refill(now)
		owed += pps * round.Seconds()
		for ; owed >= 1; owed-- {
			total++
			if p.allow() {
				passed++
			}
		}
	}
	return passed, total, now
}

func TestPolicer(t *testing.T) {
	const rate, burst = 50_000.0, 500.0
	// Below the rate: nothing dropped, whatever the round length.
	for _, round := range []time.Duration{10 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		p := newPolicer(rate, burst)
		if passed, total, _ := offer(p, 1, 0.98*rate, 2*time.Second, round); passed != total {
			t.Errorf("98%% of the rate, rounds of %v: %d of %d passed", round, passed, total)
		}
	}
	// Above it: the rate (plus the first bucket) passes.
	p := newPolicer(rate, burst)
	passed, total, end := offer(p, 1, 2*rate, 2*time.Second, 100*time.Microsecond)
	if want := 2*rate + burst; float64(passed) > want+1 || float64(passed) < want-rate*0.001 || passed >= total {
		t.Errorf("twice the rate for 2s: %d of %d passed, want about %v", passed, total, want)
	}
	// An idle spell fills the bucket up to burst, not beyond.
	_, _, end = offer(p, end, 2*rate, time.Second, time.Millisecond)
	p.refill(end + int64(time.Second))
	n := 0
	for p.allow() {
		n++
	}
	if n != burst {
		t.Errorf("after an idle second %d tokens, want %v", n, burst)
	}
	// A clock going back changes nothing.
	p.refill(end)
	if p.allow() {
		t.Error("a token after the clock went back")
	}
	if newPolicer(0, 10) != nil {
		t.Error("rate 0: want no policer")
	}
}
