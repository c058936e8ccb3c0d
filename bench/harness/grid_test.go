package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// entrySpec is one entry of a synthetic cell: its true GB/s times a bias
// of its own (what an entry's place among the others, or anything else
// that differs between two identical entries, does to it).
type entrySpec struct {
	name  string
	speed float64
	bias  float64
}

// synthRounds makes per-round GB/s for the entries: each round has a
// factor common to all its trials (interference that moves the whole
// round) and each trial its own jitter, uniform within +-jitter.
func synthRounds(seed uint64, rounds int, jitter float64, es []entrySpec) map[string][]float64 {
	rng := rand.New(rand.NewPCG(seed, 43))
	rs := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		common := 0.5 + rng.Float64()
		for _, e := range es {
			j := 1 + jitter*(2*rng.Float64()-1)
			rs[e.name] = append(rs[e.name], e.speed*e.bias*common*j)
		}
	}
	return rs
}

// synthCell is a cell of three fixed methods with copy the best and
// auto's choice: auto runs at autoFactor of copy, with autoBias, and the
// twin copy with twinBias.
func synthCell(seed uint64, rounds int, jitter, autoFactor, autoBias, twinBias float64) GridCell {
	rs := synthRounds(seed, rounds, jitter, []entrySpec{
		{"copy", 10, 1}, {"nt", 8, 1}, {"fused", 9, 1},
		{"auto", 10 * autoFactor, autoBias}, {"copy (twin)", 10, twinBias},
	})
	c := summarizeCell(rs, []string{"copy", "nt", "fused"}, "copy")
	c.Auto = "copy"
	cells := []GridCell{c}
	judgeGroup(cells, gridTolerance)
	return cells[0]
}

func TestNoiseOf(t *testing.T) {
	b := []float64{10, 11, 9, 10.5, 9.5}
	if n := noiseOf(b, b); n != 0 {
		t.Errorf("identical rounds: noise %v, want 0", n)
	}
	a := make([]float64, len(b))
	for i := range b {
		a[i] = 1.05 * b[i]
	}
	if n := noiseOf(a, b); math.Abs(n-0.05) > 1e-9 {
		t.Errorf("a steady 5%%: noise %v, want 0.05", n)
	}
	// Either way round, the same noise (within rounding).
	if n, m := noiseOf(a, b), noiseOf(b, a); math.Abs(n-m) > 1e-9 {
		t.Errorf("noise %v one way, %v the other", n, m)
	}
	if n := noiseOf(nil, nil); n != 0 {
		t.Errorf("no rounds: %v", n)
	}
}

// TestGridNoiseEqualPasses: auto equal to the method, in noisy rounds
// where the run's own twin pair shows that noise, passes, also when the
// noise alone puts auto more than 3% behind.
func TestGridNoiseEqualPasses(t *testing.T) {
	within := 0
	for seed := uint64(1); seed <= 40; seed++ {
		// Jitter of +-15% per trial over 9 rounds: the medians of two
		// identical entries land a few percent apart.
		c := synthCell(seed, 9, 0.15, 1, 1, 1)
		if !c.Pass {
			t.Errorf("seed %d: identical auto failed: ratio %.3f, band %.3f (twin noise %.3f)", seed, c.Ratio, c.Band, c.Noise)
		}
		if c.Within(gridTolerance) {
			within++
		}
	}
	// An entry-level offset seen in both identical pairs: auto and the
	// twin each 5% slower than the fixed copy.
	c := synthCell(7, 31, 0.05, 1, 0.95, 0.95)
	if !c.Pass || !c.Within(gridTolerance) || cellVerdict(c, gridTolerance) != "PASS within noise" {
		t.Errorf("offset shown by the twin: ratio %.3f, band %.3f: %s", c.Ratio, c.Band, cellVerdict(c, gridTolerance))
	}
	t.Logf("%d of 40 noisy identical cells were more than 3%% behind and passed within noise", within)
}

// TestGridNoiseRealMissFails: auto 20% slower than the method it should
// match fails, in the same noise.
func TestGridNoiseRealMissFails(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		c := synthCell(seed, 31, 0.15, 0.8, 1, 1)
		if c.Pass || cellVerdict(c, gridTolerance) != "FAIL beyond noise" {
			t.Errorf("seed %d: a 20%% miss passed: ratio %.3f, band %.3f", seed, c.Ratio, c.Band)
		}
	}
}

// TestGridBandFromRun: the band comes from the run's own twin pair, and
// from the noisiest cell of the group: the same auto rounds fail against
// a quiet twin and pass against a twin that shows as much noise.
func TestGridBandFromRun(t *testing.T) {
	quiet := synthCell(3, 31, 0.01, 1, 0.93, 1)
	if quiet.Pass {
		t.Errorf("auto 7%% behind with a quiet twin passed: ratio %.3f, band %.3f", quiet.Ratio, quiet.Band)
	}
	noisy := synthCell(3, 31, 0.01, 1, 0.93, 0.93)
	if !noisy.Pass || noisy.Band < 0.06 {
		t.Errorf("auto 7%% behind with a twin 7%% apart failed: ratio %.3f, band %.3f", noisy.Ratio, noisy.Band)
	}
	// In a group, every cell gets the largest noise of the group.
	quiet.Band, quiet.Pass = 0, false
	g := []GridCell{quiet, noisy}
	judgeGroup(g, gridTolerance)
	if g[0].Band != noisy.Noise || g[1].Band != noisy.Noise || !g[0].Pass {
		t.Errorf("group: bands %.3f, %.3f (want %.3f), pass %v", g[0].Band, g[1].Band, noisy.Noise, g[0].Pass)
	}
}

// TestGridStarts: a cell passes when auto passes in most starts, takes its
// figures from the start with the median ratio, and says when a start
// failed; it fails when auto failed in most starts, whatever the other.
func TestGridStarts(t *testing.T) {
	start := func(auto string, ratio, band float64) GridCell {
		c := GridCell{Auto: auto, Ratio: ratio, Band: band, Noise: band, Twin: auto}
		c.Pass = c.Ratio >= 1-gridTolerance-c.Band
		return c
	}
	cases := []struct {
		name   string
		per    []GridCell
		pass   bool
		median float64
		want   string
	}{
		{"every start passes", []GridCell{start("copy", 0.99, 0.01), start("copy", 1.01, 0.01), start("copy", 0.98, 0.01)}, true, 0.99, "PASS"},
		{"one start fails", []GridCell{start("copy", 0.99, 0.01), start("fused", 0.80, 0.01), start("copy", 1.00, 0.01)}, true, 0.99, "PASS within spread"},
		{"two starts fail", []GridCell{start("fused", 0.80, 0.01), start("copy", 1.00, 0.01), start("fused", 0.85, 0.01)}, false, 0.80, "FAIL beyond noise"},
		// The row shown agrees with the verdict: the median start by
		// ratio (0.94) passed against its wide band, but most failed.
		{"median start disagrees, fail", []GridCell{start("copy", 0.90, 0.01), start("copy", 0.94, 0.05), start("copy", 0.95, 0.01)}, false, 0.90, "FAIL beyond noise"},
		{"median start disagrees, pass", []GridCell{start("copy", 0.95, 0.01), start("copy", 0.93, 0.05), start("copy", 0.92, 0.06)}, true, 0.92, "PASS within spread"},
		{"within noise", []GridCell{start("copy", 0.96, 0.02), start("copy", 0.955, 0.02), start("copy", 0.965, 0.02)}, true, 0.96, "PASS within noise"},
		{"each start its own band", []GridCell{start("copy", 0.93, 0.05), start("copy", 0.93, 0.01), start("copy", 0.93, 0.01)}, false, 0.93, "FAIL beyond noise"},
	}
	for _, tc := range cases {
		c := combineStarts(tc.per)
		if c.Pass != tc.pass || c.Ratio != tc.median || cellVerdict(c, gridTolerance) != tc.want || len(c.Starts) != len(tc.per) {
			t.Errorf("%s: pass %v ratio %.3f %q (%d starts), want %v %.3f %q", tc.name, c.Pass, c.Ratio, cellVerdict(c, gridTolerance),
				len(c.Starts), tc.pass, tc.median, tc.want)
		}
		for i, s := range c.Starts {
			if p := tc.per[i]; s.Auto != p.Auto || s.Ratio != p.Ratio || s.Pass != p.Pass {
				t.Errorf("%s: start %d is %+v, measured %s %.3f %v", tc.name, i, s, p.Auto, p.Ratio, p.Pass)
			}
		}
	}
	c := combineStarts([]GridCell{start("fused", 0.80, 0.01), start("copy", 1.00, 0.01), start("fused", 0.85, 0.01)})
	if got := choices(c); got != "fused, copy, fused" {
		t.Errorf("choices %q", got)
	}
	if got := ratioSpan(c); got != "0.800 [0.800-1.000]" {
		t.Errorf("ratioSpan %q", got)
	}
}
