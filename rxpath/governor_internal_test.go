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
