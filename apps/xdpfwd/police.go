package main

// policer is -max-pps: a token bucket that lets at most rate packets a
// second through, with bursts of up to burst packets, and drops the rest.
// It is a unit of its own: its state here, its input the clock the caller
// gives it (once per poll round), tested on synthetic clocks
// (police_test.go). A nil *policer lets everything through.
type policer struct {
	perNs  float64 // tokens per nanosecond
	burst  float64 // the bucket's size
	tokens float64
	last   int64 // the clock of the last refill, ns; 0: never
}

// newPolicer returns a policer for rate packets/s with a bucket of burst
// packets (at least one), full at the start; nil for a rate of 0.
func newPolicer(rate, burst float64) *policer {
	if rate <= 0 {
		return nil
	}
	burst = max(burst, 1)
	return &policer{perNs: rate / 1e9, burst: burst, tokens: burst}
}

// refill adds the tokens earned since the last refill, at now (ns).
func (p *policer) refill(now int64) {
	if p.last != 0 && now > p.last {
		p.tokens = min(p.burst, p.tokens+float64(now-p.last)*p.perNs)
	}
	if now > p.last {
		p.last = now
	}
}

// allow takes a token for one packet; false: drop it.
func (p *policer) allow() bool {
	if p.tokens >= 1 {
		p.tokens--
		return true
	}
	return false
}
