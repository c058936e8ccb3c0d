package main

import (
	"strings"
	"testing"
)

func TestTargets(t *testing.T) {
	cases := []XDPCase{
		// Not a goal: TX-only.
		{Mode: "txonly", Size: 64, C: []XDPRun{{Mpps: 1}}, Go: []XDPRun{{Mpps: 2}}, CMedian: 1, Ratio: 2},
		// Forwarding behind C in one run of two.
		{Mode: "fwd", Size: 64, C: []XDPRun{{Mpps: 1}, {Mpps: 1}}, Go: []XDPRun{{Mpps: 0.9}, {Mpps: 1.2}},
			CMedian: 1, GoMedian: 1.05, Ratio: 1.05},
		{Mode: "l3fwd", Size: 1500, C: []XDPRun{{Mpps: 1}}, Go: []XDPRun{{Mpps: 0.99}}, CMedian: 1, GoMedian: 0.99, Ratio: 0.99},
		// Less CPU per packet at the same rate: met.
		{Mode: "rxdrop", Size: 64, Rate: 100000, C: []XDPRun{{Mpps: 0.1, ProgPerM: CPUTime{User: 2}}},
			Go: []XDPRun{{Mpps: 0.1, ProgPerM: CPUTime{User: 1, Sys: 0.5}}}, CMedian: 0.1, Ratio: 1,
			CSum: RunSummary{Mpps: 0.1, OfferedMpps: 0.1, ProgPerM: CPUTime{User: 2}}, GoSum: RunSummary{Mpps: 0.1, OfferedMpps: 0.1, ProgPerM: CPUTime{User: 1, Sys: 0.5}}},
		// Less CPU but fewer packets delivered: not met.
		{Mode: "rxdrop", Size: 64, Rate: 300000, NAPIDeferral: true, C: []XDPRun{{Mpps: 0.3, ProgPerM: CPUTime{User: 1}}},
			Go: []XDPRun{{Mpps: 0.2, ProgPerM: CPUTime{User: 0.5}}}, CMedian: 0.3, Ratio: 0.67,
			CSum: RunSummary{Mpps: 0.3, OfferedMpps: 0.3, ProgPerM: CPUTime{User: 1}}, GoSum: RunSummary{Mpps: 0.2, OfferedMpps: 0.3, Loss: 0.33, ProgPerM: CPUTime{User: 0.5}}},
		// Less CPU, and the same loss, but the generators fell behind in
		// some runs, xdpkit's more: met.
		{Mode: "rxdrop", Size: 64, Rate: 1000000, C: []XDPRun{{Mpps: 0.998, ProgPerM: CPUTime{User: 1}}},
			Go: []XDPRun{{Mpps: 0.975, ProgPerM: CPUTime{User: 0.9}}}, CMedian: 0.998, Ratio: 0.98,
			CSum: RunSummary{Mpps: 0.998, OfferedMpps: 1, Loss: 0.0019, ProgPerM: CPUTime{User: 1}}, GoSum: RunSummary{Mpps: 0.975, OfferedMpps: 0.98, Loss: 0.0018, ProgPerM: CPUTime{User: 0.9}}},
		// Less CPU, the same loss, but only xdpkit's generator missed the
		// rate: not met.
		{Mode: "rxdrop", Size: 64, Rate: 100000, C: []XDPRun{{Mpps: 0.1, ProgPerM: CPUTime{User: 1}}},
			Go: []XDPRun{{Mpps: 0.09, ProgPerM: CPUTime{User: 0.9}}}, CMedian: 0.1, Ratio: 0.9,
			CSum: RunSummary{Mpps: 0.1, OfferedMpps: 0.1, ProgPerM: CPUTime{User: 1}}, GoSum: RunSummary{Mpps: 0.09, OfferedMpps: 0.09, ProgPerM: CPUTime{User: 0.9}}},
		// The generator facing C missed the rate: judged, with a note.
		{Mode: "rxdrop", Size: 64, Rate: 300000, C: []XDPRun{{Mpps: 0.28, ProgPerM: CPUTime{User: 3}}},
			Go: []XDPRun{{Mpps: 0.3, ProgPerM: CPUTime{User: 1.5}}}, CMedian: 0.28, Ratio: 1.07,
			CSum: RunSummary{Mpps: 0.28, OfferedMpps: 0.279, ProgPerM: CPUTime{User: 3}}, GoSum: RunSummary{Mpps: 0.3, OfferedMpps: 0.3, ProgPerM: CPUTime{User: 1.5}}},
		// A rate neither generator reached: no goal.
		{Mode: "rxdrop", Size: 64, Rate: 1000000, C: []XDPRun{{Mpps: 0.3}}, Go: []XDPRun{{Mpps: 0.3}}, CMedian: 0.3, Ratio: 1,
			CSum: RunSummary{Mpps: 0.3, OfferedMpps: 0.3}, GoSum: RunSummary{Mpps: 0.3, OfferedMpps: 0.3}},
	}
	paired := []PairedResult{{Bench: "sum", Size: 64, Ratio: 1.4, P10: 1.1, P90: 1.7},
		{Bench: "copy_and_sum", Size: 64, Ratio: 0.5}, {Bench: "sum", Size: 256, Ratio: 0.9996, P10: 0.9, P90: 1.1}}
	ts := targets(cases, paired)
	want := []struct {
		name   string
		ratio  float64
		lo, hi float64
		met    bool
		missed bool // beyond the spread
	}{
		{"fwd 64 B, max rate", 1.05, 0.9, 1.2, true, false},
		{"l3fwd 1500 B, max rate", 0.99, 0.99, 0.99, false, true},
		{"rxdrop 64 B @ 100 kpps", 0.75, 0.75, 0.75, true, false},
		{"rxdrop 64 B @ 300 kpps, NAPI deferral", 0.5, 0.5, 0.5, false, true},
		{"rxdrop 64 B @ 1 Mpps", 0.9, 0.9, 0.9, true, false},
		{"rxdrop 64 B @ 100 kpps (unequal load: xdpkit's generator reached 0.090 Mpps)", 0.9, 0.9, 0.9, false, true},
		{"rxdrop 64 B @ 300 kpps (unequal load: C's generator reached 0.279 Mpps)", 0.5, 0.5, 0.5, true, false},
		{"csum.Sum 64 B (paired)", 1.4, 1.1, 1.7, true, false},
		{"csum.Sum 256 B (paired)", 0.9996, 0.9, 1.1, false, false},
	}
	if len(ts) != len(want) {
		t.Fatalf("targets: %+v", ts)
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	for i, w := range want {
		g := ts[i]
		if g.Name != w.name || !near(g.Ratio, w.ratio) || !near(g.RunLo, w.lo) || !near(g.RunHi, w.hi) || g.Met != w.met || g.Missed != w.missed {
			t.Errorf("target %d: got %+v, want %+v", i, g, w)
		}
	}
	var b strings.Builder
	writeTargets(&b, ts)
	for _, s := range []string{"5 of 9 met", "| fwd 64 B, max rate | Mpps (higher is better) | 1.05 | 0.90-1.20 | met |", "| csum.Sum 256 B (paired) | speed against the best C kernel (higher is better) | 0.9996 | 0.90-1.10 | met within spread |",
		"5 of 9 met, 3 missed beyond their spread",
		"| rxdrop 64 B @ 300 kpps, NAPI deferral | receiver CPU per packet (lower is better) | 0.50 | 0.50-0.50 | not met |"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}

// TestTargetMissedBeyondSpread: a goal is missed beyond its spread only
// when every paired run is on the wrong side (for CPU: above 1), and the
// exit status follows only such misses.
func TestTargetMissedBeyondSpread(t *testing.T) {
	for _, tc := range []struct {
		t      Target
		missed bool
	}{
		{Target{What: "Mpps", Ratio: 0.98, RunLo: 0.95, RunHi: 1.02}, false},
		{Target{What: "Mpps", Ratio: 0.9, RunLo: 0.85, RunHi: 0.97}, true},
		{Target{What: "CPU", Ratio: 1.03, RunLo: 0.98, RunHi: 1.1}, false},
		{Target{What: "CPU", Ratio: 1.2, RunLo: 1.1, RunHi: 1.3}, true},
		{Target{What: "speed", Ratio: 0.99, RunLo: 0.9, RunHi: 1.1}, false},
	} {
		tg := tc.t
		tg.judge(true)
		if tg.Missed != tc.missed {
			t.Errorf("%+v: missed %v, want %v", tc.t, tg.Missed, tc.missed)
		}
	}
	// A CPU row that delivered too few packets is missed, whatever its spread.
	tg := Target{What: "CPU", Ratio: 0.5, RunLo: 0.4, RunHi: 0.6}
	if tg.judge(false); !tg.Missed {
		t.Errorf("short delivery not missed: %+v", tg)
	}
	// Exit status: a goal met within its spread is not an error, a miss beyond it is.
	within := &Results{Paired: []PairedResult{{Bench: "sum", Size: 64, Ratio: 0.99, P10: 0.9, P90: 1.1}}}
	if err := verdictErr(within); err != nil {
		t.Errorf("met within spread: %v", err)
	}
	beyond := &Results{Paired: []PairedResult{{Bench: "sum", Size: 64, Ratio: 0.8, P10: 0.7, P90: 0.9}}}
	if err := verdictErr(beyond); err == nil {
		t.Error("a miss beyond the spread: no error")
	}
}

// TestTargetsFastestC: a forwarding goal compares xdpkit with the fastest
// C forwarder that ran the case, by median, and pairs xdpkit's runs with
// that program's for the spread; rxdrop stays against the C reference.
func TestTargetsFastestC(t *testing.T) {
	sample := func(mpps ...float64) *SampleRuns {
		s := &SampleRuns{Mode: "l2fwd"}
		for _, m := range mpps {
			s.Runs = append(s.Runs, XDPRun{Mpps: m})
		}
		s.Sum = summarize(s.Runs)
		return s
	}
	runs := func(mpps ...float64) []XDPRun {
		var r []XDPRun
		for _, m := range mpps {
			r = append(r, XDPRun{Mpps: m})
		}
		return r
	}
	cases := []XDPCase{
		// xsksample is the fastest C: the goal is against it.
		{Mode: "hairpin", Size: 64, C: runs(0.5, 0.5, 0.5), Go: runs(0.55, 0.6, 0.5), CMedian: 0.5, GoMedian: 0.55, Ratio: 1.1,
			Sample: sample(0.6, 0.5, 0.7)},
		// The C reference is faster than xsksample.
		{Mode: "hairpin", Size: 1500, C: runs(0.4, 0.5, 0.6), Go: runs(0.45, 0.5, 0.5), CMedian: 0.5, GoMedian: 0.5, Ratio: 1,
			Sample: sample(0.3, 0.3, 0.3)},
		// Only the C reference ran it.
		{Mode: "fwd", Size: 64, C: runs(1, 1), Go: runs(1.1, 1.1), CMedian: 1, GoMedian: 1.1, Ratio: 1.1},
		// xsksample ran it, faster, but rxdrop stays against the C reference.
		{Mode: "rxdrop", Size: 64, C: runs(1, 1), Go: runs(1.1, 1.1), CMedian: 1, GoMedian: 1.1, Ratio: 1.1,
			Sample: sample(2, 2)},
		// xdpkit against xsksample alone (the C reference not run).
		{Mode: "hairpin", Size: 64, Rate: 0, Go: runs(0.9), GoMedian: 0.9, Sample: sample(1)},
	}
	want := []struct {
		name, against string
		ratio, lo, hi float64
		met, missed   bool
	}{
		{"hairpin 64 B, max rate, against xsksample", "xsksample", 0.55 / 0.6, 0.5 / 0.7, 1.2, false, false},
		{"hairpin 1500 B, max rate", "C reference", 1, 0.5 / 0.6, 1.125, true, false},
		{"fwd 64 B, max rate", "C reference", 1.1, 1.1, 1.1, true, false},
		{"rxdrop 64 B, max rate", "", 1.1, 1.1, 1.1, true, false},
		{"hairpin 64 B, max rate, against xsksample", "xsksample", 0.9, 0.9, 0.9, false, true},
	}
	ts := targets(cases, nil)
	if len(ts) != len(want) {
		t.Fatalf("targets: %+v", ts)
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	for i, w := range want {
		g := ts[i]
		if g.Name != w.name || g.Against != w.against || !near(g.Ratio, w.ratio) || !near(g.RunLo, w.lo) || !near(g.RunHi, w.hi) || g.Met != w.met || g.Missed != w.missed {
			t.Errorf("target %d: got %+v, want %+v", i, g, w)
		}
	}
	var b strings.Builder
	writeTargets(&b, ts)
	if !strings.Contains(b.String(), "| hairpin 64 B, max rate, against xsksample | Mpps (higher is better) | 0.92 | 0.71-1.20 | met within spread |") {
		t.Errorf("goal table:\n%s", b.String())
	}
}

// TestReadmeFoldsMaxRate: README shows each mode's maximum-rate goals in
// one row, in the place of the mode's first, naming xsksample where it
// was the fastest C forwarder, with the verdict of the goals together
// (not met when one is missed beyond its spread, met within spread when
// none is and one is not met).
func TestReadmeFoldsMaxRate(t *testing.T) {
	runs := func(m float64) []XDPRun { return []XDPRun{{Mpps: m}} }
	r := &Results{XDP: []XDPCase{
		{Mode: "rxdrop", Size: 64, C: runs(1), Go: runs(1.2), CMedian: 1, GoMedian: 1.2, Ratio: 1.2},
		{Mode: "hairpin", Size: 64, C: runs(0.5), Go: runs(0.6), CMedian: 0.5, GoMedian: 0.6, Ratio: 1.2,
			Sample: &SampleRuns{Mode: "l2fwd", Runs: runs(0.8), Sum: RunSummary{Mpps: 0.8}}},
		{Mode: "hairpin", Size: 1500, C: runs(0.5), Go: runs(0.55), CMedian: 0.5, GoMedian: 0.55, Ratio: 1.1,
			Sample: &SampleRuns{Mode: "l2fwd", Runs: runs(0.4), Sum: RunSummary{Mpps: 0.4}}},
		{Mode: "rxdrop", Size: 1500, C: runs(1), Go: runs(0.9), CMedian: 1, GoMedian: 0.9, Ratio: 0.9},
		// Behind by the median at 64 B, ahead in one paired run: the
		// row is met within spread, not "not met".
		{Mode: "fwd", Size: 64, C: []XDPRun{{Mpps: 1}, {Mpps: 1}}, Go: []XDPRun{{Mpps: 0.9}, {Mpps: 1.2}}, CMedian: 1, GoMedian: 0.98, Ratio: 0.98},
		{Mode: "fwd", Size: 1500, C: runs(1), Go: runs(1.1), CMedian: 1, GoMedian: 1.1, Ratio: 1.1},
	}}
	got := readmeReport(r)
	for _, want := range []string{
		"| rxdrop 64 / 1500 B, max rate | Mpps (higher is better) | 1.20, 0.90 | 1.20-1.20, 0.90-0.90 | not met |\n" +
			"| hairpin 64 / 1500 B, max rate | Mpps against the fastest C (higher is better) | 0.75 (xsksample), 1.10 | 0.75-0.75, 1.10-1.10 | not met |\n",
		"| fwd 64 / 1500 B, max rate | Mpps against the fastest C (higher is better) | 0.98, 1.10 | 0.90-1.20, 1.10-1.10 | met within spread |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("README section:\n%s\nwant it to hold:\n%s", got, want)
		}
	}
}
