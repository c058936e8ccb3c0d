package main

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// device is a synthetic device under test: it forwards up to capacity
// packets/s and drops the excess.
func device(capacity float64) func(rate float64) (Trial, error) {
	return func(rate float64) (Trial, error) {
		sent := uint64(rate) // a one-second trial
		recv := sent
		if rate > capacity {
			recv = uint64(capacity)
		}
		return judge(rate, sent, recv, 1, rate, 0), nil
	}
}

// lossy returns a device trial function whose pass is judged against
// bound.
func lossy(capacity, bound float64) func(rate float64) (Trial, error) {
	return func(rate float64) (Trial, error) {
		sent := uint64(rate)
		recv := sent
		if rate > capacity {
			recv = uint64(capacity)
		}
		return judge(rate, sent, recv, 1, rate, bound), nil
	}
}

func TestSearchFindsCapacity(t *testing.T) {
	for _, tc := range []struct {
		capacity, min, max, res float64
		relative                bool
	}{
		{50_000, 1000, 1_000_000, 0.02, true},
		{50_000, 1000, 1_000_000, 500, false},
		{123_456, 10, 200_000, 0.01, true},
		{1_500, 1000, 1_000_000, 0.05, true},
		{999_999, 1000, 1_000_000, 0.02, true},
	} {
		c := Config{Min: tc.min, Max: tc.max, Resolution: tc.res, Relative: tc.relative, MaxTrials: 40}
		var trials []Trial
		r, err := Search(c, device(tc.capacity), func(t Trial) { trials = append(trials, t) })
		if err != nil {
			t.Fatal(err)
		}
		width := tc.res
		if tc.relative {
			width = tc.res * r.HiPPS
		}
		if !r.Converged || r.RatePPS > tc.capacity || r.RatePPS < tc.capacity-width || r.HiPPS-r.LoPPS > width {
			t.Errorf("capacity %v: result %+v (width %v)", tc.capacity, r, width)
		}
		// Bisection: about log2((max-min)/width) trials, plus the first.
		if bound := math.Ceil(math.Log2((tc.max-tc.min)/width)) + 2; float64(r.Trials) > bound || len(trials) != r.Trials {
			t.Errorf("capacity %v: %d trials (%d reported), want at most %v", tc.capacity, r.Trials, len(trials), bound)
		}
		for i, tr := range trials {
			if tr.N != i+1 || tr.Type != "trial" || tr.Pass != (tr.RatePPS <= tc.capacity) {
				t.Errorf("trial %d: %+v", i, tr)
			}
			if tr.LoPPS >= tr.HiPPS && tr.HiPPS != 0 {
				t.Errorf("trial %d: bounds %v >= %v", i, tr.LoPPS, tr.HiPPS)
			}
		}
	}
}

// TestSearchPDR: with a loss bound, the answer is the rate at which the
// loss reaches the bound: capacity / (1 - bound).
func TestSearchPDR(t *testing.T) {
	const capacity, bound = 100_000.0, 5.0
	c := Config{Min: 1000, Max: 1_000_000, LossPct: bound, Resolution: 0.01, Relative: true, MaxTrials: 40}
	r, err := Search(c, lossy(capacity, bound), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := capacity / (1 - bound/100)
	if !r.Converged || r.RatePPS > want || r.RatePPS < want*0.99*0.99 {
		t.Errorf("PDR %v: want within 1%% below %v (%+v)", r.RatePPS, want, r)
	}
	// The NDR of the same device is its capacity.
	c.LossPct = 0
	r, _ = Search(c, lossy(capacity, 0), nil)
	if r.RatePPS > capacity || r.RatePPS < capacity*0.98 {
		t.Errorf("NDR %v: want within 1%% below %v", r.RatePPS, capacity)
	}
}

func TestSearchEnds(t *testing.T) {
	c := Config{Min: 1000, Max: 100_000, Resolution: 0.02, Relative: true, MaxTrials: 20}
	// Max passes: one trial.
	r, err := Search(c, device(1e9), nil)
	if err != nil || r.Trials != 1 || r.RatePPS != c.Max || !r.Converged || r.HiPPS != 0 {
		t.Errorf("device faster than max: %+v, %v", r, err)
	}
	// Nothing passes: the search ends at Min, with no rate.
	r, err = Search(c, device(10), nil)
	if err != nil || r.RatePPS != 0 || !r.Converged || r.HiPPS != c.Min {
		t.Errorf("device slower than min: %+v, %v", r, err)
	}
	// Start below the capacity: then Max, then bisection.
	c.Start = 2000
	var rates []float64
	r, _ = Search(c, device(50_000), func(t Trial) { rates = append(rates, t.RatePPS) })
	if len(rates) < 3 || rates[0] != 2000 || rates[1] != c.Max || r.RatePPS > 50_000 || r.RatePPS < 49_000 {
		t.Errorf("start 2000: rates %v, result %+v", rates, r)
	}
	// Min passes, everything above fails at this resolution.
	c.Start = 0
	r, _ = Search(c, device(1010), nil)
	if r.RatePPS != c.Min || !r.Converged {
		t.Errorf("capacity just above min: %+v", r)
	}
}

// TestSearchBounded: a device that passes and fails at random still ends
// within MaxTrials, and says it did not converge when it ran out.
func TestSearchBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	flaky := func(rate float64) (Trial, error) {
		return Trial{Pass: rng.IntN(2) == 0}, nil
	}
	c := Config{Min: 1, Max: 1e9, Resolution: 1, MaxTrials: 7}
	r, err := Search(c, flaky, nil)
	if err != nil || r.Trials > 7 {
		t.Fatalf("%+v, %v", r, err)
	}
	if r.Trials == 7 && r.Converged {
		t.Errorf("ran out of trials but converged: %+v", r)
	}
	// A device that never settles: MaxTrials ends it, not converged.
	c.MaxTrials = 3
	r, _ = Search(c, device(5e8), nil)
	if r.Trials != 3 || r.Converged || r.Reason == "" {
		t.Errorf("3 trials for a 1-pps resolution: %+v", r)
	}
}

func TestSearchError(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	r, err := Search(Config{Min: 1, Max: 100, Resolution: 1, MaxTrials: 10}, func(float64) (Trial, error) {
		n++
		if n == 2 {
			return Trial{}, boom
		}
		return Trial{Pass: false}, nil
	}, nil)
	if !errors.Is(err, boom) || r.Trials != 2 || r.HiPPS != 100 {
		t.Errorf("%+v, %v", r, err)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []Config{
		{Min: 0, Max: 10, Resolution: 1, MaxTrials: 1},
		{Min: 10, Max: 5, Resolution: 1, MaxTrials: 1},
		{Min: 1, Max: math.Inf(1), Resolution: 1, MaxTrials: 1},
		{Min: 1, Max: 10, Start: 11, Resolution: 1, MaxTrials: 1},
		{Min: 1, Max: 10, LossPct: -1, Resolution: 1, MaxTrials: 1},
		{Min: 1, Max: 10, LossPct: 100, Resolution: 1, MaxTrials: 1},
		{Min: 1, Max: 10, Resolution: 0, MaxTrials: 1},
		{Min: 1, Max: 10, Resolution: 1, Relative: true, MaxTrials: 1},
		{Min: 1, Max: 10, Resolution: 1, MaxTrials: 0},
		{Min: math.NaN(), Max: 10, Resolution: 1, MaxTrials: 1},
	} {
		if err := c.Check(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestJudge: the trial's verdict from its counts.
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		rate            float64
		sent, recv      uint64
		achieved, bound float64
		pass            bool
		loss            float64
	}{
		{1000, 1000, 1000, 1000, 0, true, 0},
		{1000, 1000, 999, 1000, 0, false, 0.1},
		{1000, 1000, 999, 1000, 0.5, true, 0.1},
		{1000, 1000, 1002, 1000, 0, true, 0}, // more than sent (not possible without duplicates): no loss
		{1000, 1000, 1000, 900, 0, false, 0}, // the generator fell short of the rate
		{1000, 0, 0, 0, 0, false, 0},         // nothing sent
		{1000, 1000, 1000, 960, 0, true, 0},  // within the generator's tolerance
	} {
		tr := judge(tc.rate, tc.sent, tc.recv, 1, tc.achieved, tc.bound)
		if tr.Pass != tc.pass || math.Abs(tr.LossPct-tc.loss) > 1e-9 || !tr.Pass && tr.Reason == "" {
			t.Errorf("%+v: %+v", tc, tr)
		}
	}
}

func TestParseResolution(t *testing.T) {
	for _, tc := range []struct {
		in  string
		v   float64
		rel bool
		ok  bool
	}{
		{"2%", 0.02, true, true}, {"0.5%", 0.005, true, true}, {"1000", 1000, false, true}, {"1k", 1000, false, true},
		{"5kpps", 5000, false, true}, {"0.02", 0, false, false}, {"0%", 0, false, false}, {"100%", 0, false, false}, {"x", 0, false, false},
	} {
		v, rel, err := parseResolution(tc.in)
		if (err == nil) != tc.ok || tc.ok && (math.Abs(v-tc.v) > 1e-12 || rel != tc.rel) {
			t.Errorf("%q: %v %v %v", tc.in, v, rel, err)
		}
	}
}

// TestRetries: a failed trial runs again, up to the retries; the first
// pass ends it; an error ends it at once.
func TestRetries(t *testing.T) {
	var calls int
	outcomes := []bool{false, false, true, false}
	run := func(float64) (Trial, error) {
		calls++
		return Trial{Pass: outcomes[calls-1]}, nil
	}
	tr, err := withRetries(run, 2)(1000)
	if err != nil || !tr.Pass || tr.Attempts != 3 || calls != 3 {
		t.Errorf("pass on the third attempt: %+v, %d calls, %v", tr, calls, err)
	}
	calls, outcomes = 0, []bool{false, false, false, true}
	if tr, _ := withRetries(run, 2)(1000); tr.Pass || tr.Attempts != 3 || calls != 3 {
		t.Errorf("three failures with 2 retries: %+v, %d calls", tr, calls)
	}
	calls, outcomes = 0, []bool{true}
	if tr, _ := withRetries(run, 5)(1000); !tr.Pass || tr.Attempts != 1 || calls != 1 {
		t.Errorf("a pass at once: %+v, %d calls", tr, calls)
	}
	boom := errors.New("boom")
	calls = 0
	if _, err := withRetries(func(float64) (Trial, error) { calls++; return Trial{}, boom }, 3)(1000); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("error: %v after %d calls", err, calls)
	}
	// Search with retries on a device that drops at random below its
	// capacity one trial in three still finds the capacity.
	rng := rand.New(rand.NewPCG(3, 4))
	noisy := func(rate float64) (Trial, error) {
		tr, _ := device(50_000)(rate)
		if rng.IntN(3) == 0 {
			tr.Pass, tr.Reason = false, "a transient drop"
		}
		return tr, nil
	}
	c := Config{Min: 1000, Max: 100_000, Resolution: 0.02, Relative: true, MaxTrials: 20}
	r, _ := Search(c, withRetries(noisy, 3), nil)
	if r.RatePPS < 48_000 || r.RatePPS > 50_000 {
		t.Errorf("noisy device with retries: %+v", r)
	}
}
