package main

import (
	"math"
	"strings"
	"testing"
)

func TestParseLatLine(t *testing.T) {
	// xdpbench --latency's line: its fields open the object.
	line := `{"lat_samples":1990,"lat_negative":2,"lat_p50_ns":12500,"lat_p99_ns":114000,"lat_p999_ns":219000,"lat_max_ns":900000,"cpu_ns":3000000,"spin":false,"mode":"rxdrop","frames":2000,"seconds":2.0}`
	r, err := parseLatLine([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if r.Samples != 1990 || r.Negative != 2 || r.Frames != 2000 || r.P50Us != 12.5 || r.P99Us != 114 || r.P999Us != 219 || r.MaxUs != 900 {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parseLatLine([]byte(`{"mode":"rxdrop","frames":5}`)); err == nil {
		t.Error("a line without lat_samples was taken")
	}
	if _, err := parseLatLine([]byte("xdpbench: ready")); err == nil {
		t.Error("a line that is not JSON was taken")
	}
}

func latRuns(p50, p99, cpu []float64, frames uint64) []LatRun {
	var rs []LatRun
	for i := range p50 {
		rs = append(rs, LatRun{P50Us: p50[i], P99Us: p99[i], P999Us: 2 * p99[i], CPUPerM: cpu[i], Frames: frames, Sent: 1000})
	}
	return rs
}

func TestLatSummarize(t *testing.T) {
	r := LatRecv{Name: "xdpkit", Runs: latRuns([]float64{30, 10, 20}, []float64{100, 300, 200}, []float64{1, 3, 2}, 1000)}
	r.summarize()
	want := LatRecv{Med: LatFig{20, 200, 400, 2}, Lo: LatFig{10, 100, 200, 1}, Hi: LatFig{30, 300, 600, 3}}
	if r.Med != want.Med || r.Lo != want.Lo || r.Hi != want.Hi {
		t.Errorf("median %+v lo %+v hi %+v, want %+v %+v %+v", r.Med, r.Lo, r.Hi, want.Med, want.Lo, want.Hi)
	}
	if got := latOrder(1, 3); got[0] != 1 || got[1] != 2 || got[2] != 0 {
		t.Errorf("latOrder(1, 3) = %v", got)
	}
	// Over as many runs as receivers, each runs first once.
	first := map[int]bool{}
	for r := range 3 {
		first[latOrder(r, 3)[0]] = true
	}
	if len(first) != 3 {
		t.Errorf("the rotation puts %d receivers first, want 3", len(first))
	}
}

func TestLatencyTargets(t *testing.T) {
	mk := func(rate int, napi bool, c, g []LatRun) LatCase {
		lc := LatCase{Rate: rate, NAPIDeferral: napi, Recv: []LatRecv{{Name: "c-poll", Runs: c}, {Name: "c-spin", Runs: c}, {Name: "xdpkit", Runs: g}}}
		for i := range lc.Recv {
			lc.Recv[i].summarize()
		}
		return lc
	}
	c := latRuns([]float64{10, 12}, []float64{100, 120}, []float64{2, 2}, 1000)
	l := &Latency{Size: 66, Cases: []LatCase{
		// Better on every axis: met.
		mk(100_000, false, c, latRuns([]float64{5, 6}, []float64{50, 60}, []float64{1, 1}, 1000)),
		// p50 behind in every paired run: not met; p99 behind in one
		// run only: met within spread; CPU ahead: met.
		mk(300_000, false, c, latRuns([]float64{50, 60}, []float64{90, 140}, []float64{1, 1}, 1000)),
		// 10% of the sent packets lost, C none: not met, whatever the figures.
		mk(1_000_000, false, c, latRuns([]float64{5, 6}, []float64{50, 60}, []float64{1, 1}, 900)),
		// With NAPI deferral: no goal.
		mk(100_000, true, c, latRuns([]float64{50, 60}, []float64{500, 600}, []float64{9, 9}, 1000)),
	}}
	ts := latencyTargets(l)
	want := []struct {
		what        string
		ratio       float64
		met, missed bool
	}{
		{"p50", 5.5 / 11, true, false}, {"p99", 55.0 / 110, true, false}, {"CPU", 0.5, true, false},
		{"p50", 55.0 / 11, false, true}, {"p99", 115.0 / 110, false, false}, {"CPU", 0.5, true, false},
		{"p50", 5.5 / 11, false, true}, {"p99", 55.0 / 110, false, true}, {"CPU", 0.5, false, true},
	}
	if len(ts) != len(want) {
		t.Fatalf("%d goals, want %d: %+v", len(ts), len(want), ts)
	}
	for i, w := range want {
		g := ts[i]
		if g.What != w.what || math.Abs(g.Ratio-w.ratio) > 1e-9 || g.Met != w.met || g.Missed != w.missed {
			t.Errorf("goal %d (%s): %s ratio %.3f met %v missed %v, want %s %.3f %v %v", i, g.Name, g.What, g.Ratio, g.Met, g.Missed, w.what, w.ratio, w.met, w.missed)
		}
	}
	// p99 at 300 kpps: paired runs 90/100 and 140/120.
	if g := ts[4]; math.Abs(g.RunLo-0.9) > 1e-9 || math.Abs(g.RunHi-140.0/120) > 1e-9 || targetVerdict(g) != "met within spread" {
		t.Errorf("p99 spread %.3f-%.3f (%s), want 0.900-1.167, met within spread", g.RunLo, g.RunHi, targetVerdict(g))
	}
	if !strings.Contains(ts[3].Name, "300 kpps") {
		t.Errorf("goal name %q does not say its rate", ts[3].Name)
	}
	if n := missedGoals(ts); n != 4 {
		t.Errorf("%d goals missed beyond their spread, want 4", n)
	}

	var b strings.Builder
	writeLatency(&b, l, 2)
	out := b.String()
	for _, s := range []string{"| 300 kpps | off | C, poll(2) when idle | 11.0 [10.0-12.0] | 110 [100-120] |", "| 100 kpps | 2, 200µs | xdpkit"} {
		if !strings.Contains(out, s) {
			t.Errorf("the latency table lacks %q:\n%s", s, out)
		}
	}
	writeTargets(&b, ts)
	if !strings.Contains(b.String(), "one-way delay p50 (lower is better)") {
		t.Errorf("the goal table does not say what a p50 goal compares:\n%s", b.String())
	}

	// README: one row per rate for its three goals, met only if all are.
	readme := readmeReport(&Results{Latency: l})
	rows := 0
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "| latency ") {
			rows++
		}
	}
	if rows != 3 || !strings.Contains(readme, "| p50, p99, CPU (lower is better) | 0.50, 0.50, 0.50 |") ||
		!strings.Contains(readme, "300 kpps, xdpkit against C poll(2) | p50, p99, CPU (lower is better) | 5.00, 1.05, 0.50 | 5.00-5.00, 0.90-1.17, 0.50-0.50 | not met |") {
		t.Errorf("README's latency rows (want 3, one per rate):\n%s", readme)
	}
}

// TestLatDesc: xdpkit's latency receivers are named with RuntimeSleep
// when the harness's arguments, -goargs, then the receiver's own, turn it
// on, and without it when they turn it off.
func TestLatDesc(t *testing.T) {
	defer func(a []string) { goArgs = a }(goArgs)
	const def, rt = "xdpkit (rxpath.Poller, defaults, Prefetch)", "xdpkit (rxpath.Poller, RuntimeSleep, Prefetch)"
	for _, c := range []struct {
		goArgs, extra []string
		desc, want    string
	}{
		{nil, nil, def, def},
		{[]string{"--runtime-sleep"}, nil, def, "xdpkit (rxpath.Poller, defaults, Prefetch and RuntimeSleep)"},
		{[]string{"--runtime-sleep", "--runtime-sleep=false"}, nil, def, def},
		{[]string{"--runtime-sleeps=2"}, nil, def, def},
		{nil, []string{"--runtime-sleep"}, rt, rt},
		{[]string{"--runtime-sleep"}, []string{"--runtime-sleep"}, rt, rt},
		{[]string{"--runtime-sleep=false"}, []string{"--runtime-sleep"}, rt, rt},
	} {
		goArgs = c.goArgs
		if got := latDesc(c.desc, false, c.extra); got != c.want {
			t.Errorf("-goargs %q, receiver's %q: %q, want %q", c.goArgs, c.extra, got, c.want)
		}
	}
	if got := latDesc("C, spinning", true, []string{"--spin"}); got != "C, spinning" {
		t.Errorf("C receiver: %q", got)
	}
}
