package main

import (
	"errors"
	"fmt"
	"math"
)

// The search is a unit of its own: its state in Search's locals, its
// inputs the Config and what each trial returns, and the trials run by
// the function it is given, so that it is tested on synthetic devices
// (search_test.go) without a packet sent.

// Config is what the search looks for and within which bounds.
type Config struct {
	Min, Max float64 // the rates searched, packets/s (0 < Min <= Max)
	Start    float64 // the first trial's rate (0: Max)
	// LossPct is the loss bound in percent: 0 finds the NDR (no drop
	// rate), 0.5 a PDR (partial drop rate).
	LossPct float64
	// Resolution is the width at which the search stops: a fraction of
	// the upper bound when Relative (0.02: 2%), else packets/s.
	Resolution float64
	Relative   bool
	MaxTrials  int // at most this many trials
}

// Trial is one trial's outcome.
type Trial struct {
	Type        string  // "trial"
	N           int     // 1, 2, ...
	RatePPS     float64 // the rate asked of the generator
	Sent        uint64  // what the generator sent
	Received    uint64  // what the receiver counted (duplicates left out)
	LossPct     float64 // 100 * (Sent - Received) / Sent, at least 0
	AchievedPPS float64 // Sent over the generator's sending time
	Seconds     float64 // the trial's length, set-up included
	Pass        bool
	Reason      string `json:",omitempty"` // why it failed
	// Attempts is how many times the trial ran (-retries: a failed
	// trial runs again); the counts are the last attempt's.
	Attempts int
	// LoPPS and HiPPS are the search's bounds after the trial: the
	// highest rate that passed (0: none) and the lowest that failed (0:
	// none).
	LoPPS, HiPPS float64
}

// Result is the search's answer.
type Result struct {
	Type string // "result"
	// RatePPS is the highest rate that passed (the NDR with a loss bound
	// of 0, a PDR otherwise); 0 when none did.
	RatePPS      float64
	LossPct      float64 // the bound
	LoPPS, HiPPS float64 // the bounds at the end (HiPPS 0: Max passed)
	Trials       int
	// Converged says the bounds closed to the resolution (or Max passed,
	// or Min failed); false when MaxTrials ran out first.
	Converged bool
	Reason    string
	Seconds   float64 `json:",omitempty"` // the whole search
}

// Errors of Search.
var (
	ErrConfig = errors.New("bad search config")
)

// Check validates c and fills Start.
func (c *Config) Check() error {
	switch {
	case !(c.Min > 0) || !(c.Max >= c.Min) || math.IsInf(c.Max, 0):
		return fmt.Errorf("%w: want 0 < min (%v) <= max (%v)", ErrConfig, c.Min, c.Max)
	case c.Start != 0 && (c.Start < c.Min || c.Start > c.Max):
		return fmt.Errorf("%w: start %v outside [%v, %v]", ErrConfig, c.Start, c.Min, c.Max)
	case !(c.LossPct >= 0) || c.LossPct >= 100:
		return fmt.Errorf("%w: loss bound %v%%: want 0 <= loss < 100", ErrConfig, c.LossPct)
	case !(c.Resolution > 0) || c.Relative && c.Resolution >= 1:
		return fmt.Errorf("%w: resolution %v: want a fraction in (0, 1) or packets/s above 0", ErrConfig, c.Resolution)
	case c.MaxTrials < 1:
		return fmt.Errorf("%w: max trials %d: want at least 1", ErrConfig, c.MaxTrials)
	}
	if c.Start == 0 {
		c.Start = c.Max
	}
	return nil
}

// width is the resolution in packets/s at the upper bound hi.
func (c *Config) width(hi float64) float64 {
	if c.Relative {
		return c.Resolution * hi
	}
	return c.Resolution
}

// Search binary-searches the highest rate in [Min, Max] whose trial loses
// at most LossPct: a first trial at Start; then, while no trial has
// failed, one at Max; then halving the interval between the highest rate
// that passed (Min while none has) and the lowest that failed, until it
// is no wider than the resolution; and if no rate passed by then, one
// trial at Min. run runs a trial at a rate and fills Sent, Received,
// LossPct, AchievedPPS, Seconds, Pass and Reason; report sees each trial
// with its bounds. An error from run ends the search with it (the result
// so far is returned).
func Search(c Config, run func(rate float64) (Trial, error), report func(Trial)) (Result, error) {
	if err := c.Check(); err != nil {
		return Result{}, err
	}
	var lo, hi float64 // highest pass, lowest fail; 0: none yet
	res := Result{Type: "result", LossPct: c.LossPct}
	done := func(converged bool, why string) (Result, error) {
		res.RatePPS, res.LoPPS, res.HiPPS, res.Converged, res.Reason = lo, lo, hi, converged, why
		return res, nil
	}
	rate := c.Start
	for {
		if res.Trials >= c.MaxTrials {
			return done(false, fmt.Sprintf("stopped after %d trials, the bounds not closed to the resolution", res.Trials))
		}
		t, err := run(rate)
		res.Trials++
		t.Type, t.N, t.RatePPS = "trial", res.Trials, rate
		if err != nil {
			res.RatePPS, res.LoPPS, res.HiPPS = lo, lo, hi
			return res, fmt.Errorf("trial %d at %.0f pps: %w", res.Trials, rate, err)
		}
		if t.Pass {
			lo = max(lo, rate)
		} else if hi == 0 || rate < hi {
			hi = rate
		}
		t.LoPPS, t.HiPPS = lo, hi
		if report != nil {
			report(t)
		}
		switch {
		case lo >= c.Max:
			return done(true, "the largest rate passed")
		case hi != 0 && hi <= c.Min:
			return done(true, "the smallest rate failed")
		case hi == 0:
			rate = c.Max // passed below Max, nothing failed yet
			continue
		}
		floor := max(lo, c.Min)
		if hi-floor <= c.width(hi) {
			if lo > 0 {
				return done(true, "the bounds are within the resolution")
			}
			rate = c.Min // none passed yet: does Min?
			continue
		}
		rate = math.Round((floor + hi) / 2) // whole packets/s
		if rate <= floor || rate >= hi {
			return done(true, "the bounds are a packet/s apart")
		}
	}
}

// withRetries runs a failed trial again, up to retries more times: the
// rate passes when one attempt does. On a host where other work makes
// the path drop now and then, a rate the path carries passes; a rate
// above what it carries fails every attempt.
func withRetries(run func(rate float64) (Trial, error), retries int) func(rate float64) (Trial, error) {
	return func(rate float64) (Trial, error) {
		var t Trial
		for i := 0; i <= retries; i++ {
			var err error
			t, err = run(rate)
			t.Attempts = i + 1
			if err != nil || t.Pass {
				return t, err
			}
		}
		return t, nil
	}
}
