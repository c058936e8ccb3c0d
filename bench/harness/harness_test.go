package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/xdpkit/xdpkit/txpath"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tc.v...)
		if got := median(tc.v); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.v, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.v[i] {
				t.Errorf("median modified its input: %v", tc.v)
			}
		}
	}
}

// TestRegion checks the UMEM-like layout: each payload starts payloadOff
// into its own frame(s), the slots cycle, and nothing leaves the region.
func TestRegion(t *testing.T) {
	mem := make([]byte, 64<<10)
	for _, l := range gridLayouts {
		for _, size := range []int{64, 1500, 4096, 20000} {
			testRegion(t, mem, l, size)
		}
	}
}

func testRegion(t *testing.T, mem []byte, l layout, size int) {
	{
		r := newRegion(mem, size, l.Frame, l.Off)
		seen := map[int]bool{}
		for i := 0; i < 3*r.slots; i++ {
			d := r.dst(size)
			if len(d) != size {
				t.Fatalf("size %d: dst of %d bytes", size, len(d))
			}
			off := int(uintptrOf(d) - uintptrOf(mem))
			if off%l.Frame != l.Off%l.Frame || off+size > len(mem) {
				t.Fatalf("size %d: payload at %d", size, off)
			}
			seen[off] = true
		}
		if len(seen) != r.slots {
			t.Errorf("size %d: %d distinct slots, want %d", size, len(seen), r.slots)
		}
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestMeasureCell runs a tiny cell and checks its verdict is consistent.
func TestMeasureCell(t *testing.T) {
	mem := make([]byte, 1<<20)
	src := make([]byte, 1500+srcSpan)
	c := measureCell(newRegion(mem, 1500, 4096, 42), src, 1500, false, true, 3)
	if len(c.Methods) != 4 {
		t.Fatalf("methods %v", c.Methods)
	}
	for name, f := range c.Methods {
		if f.Best <= 0 || f.Median <= 0 || f.Median > f.Best {
			t.Errorf("%s: %+v", name, f)
		}
	}
	if c.Auto != txpath.ChooseCopy(1500, false, true).String() || c.Best == "" || c.Best == "auto" {
		t.Errorf("cell %+v", c)
	}
	// The twin pair is auto's choice, and the noise is measured.
	if c.Twin != c.Auto || c.Noise < 0 || math.IsNaN(c.Noise) {
		t.Errorf("twin %q (auto %q), noise %v", c.Twin, c.Auto, c.Noise)
	}
	cells := []GridCell{c}
	judgeGroup(cells, gridTolerance)
	if c = cells[0]; c.Band != c.Noise || c.Pass != (c.Ratio >= 1-gridTolerance-c.Band) {
		t.Errorf("pass %v with ratio %v, band %v", c.Pass, c.Ratio, c.Band)
	}
	// Without offload, the candidate outside ChooseCopy's set is measured.
	c = measureCell(newRegion(mem, 1500, 2048, 298), src, 1500, true, false, 3)
	if _, ok := c.Methods["copy+sum(dst)"]; !ok || len(c.Methods) != 5 {
		t.Fatalf("methods %v", c.Methods)
	}
}

// TestReadmeIsRendered checks that README.md's bench section and
// bench/out/summary.md are what the harness renders from bench/out's
// results.json and history.jsonl: make bench (or make bench-render)
// writes both, and nobody edits either by hand. The README section must
// carry no commit hash or date.
func TestReadmeIsRendered(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	summary, err := os.ReadFile("../out/summary.md")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../out/results.json")
	if err != nil {
		t.Fatal(err)
	}
	res := &Results{}
	if err := json.Unmarshal(b, res); err != nil {
		t.Fatal(err)
	}
	if res.History, err = readHistory("../out/history.jsonl"); err != nil {
		t.Fatal(err)
	}
	if res.Grid != nil {
		res.Grid.Calib.Source = "bench/out/nt-calibration.json" // as rerender does
	}
	_, section, _, err := readmeSection(readme)
	if err != nil {
		t.Fatal(err)
	}
	if want := readmeReport(res); string(section) != want {
		t.Errorf("README.md's bench section (%d bytes) is not what the harness renders (%d bytes): run make bench-render", len(section), len(want))
	}
	if want := report(res); string(summary) != want {
		t.Errorf("bench/out/summary.md (%d bytes) is not what the harness renders (%d bytes): run make bench-render", len(summary), len(want))
	}
	if res.Machine.Commit != "" && bytes.Contains(section, []byte(res.Machine.Commit)) {
		t.Errorf("README.md's bench section names the commit %s", res.Machine.Commit)
	}
	for _, h := range res.History {
		if len(h.Date) >= 10 && bytes.Contains(section, []byte(h.Date[:10])) {
			t.Errorf("README.md's bench section has the date %s", h.Date[:10])
		}
	}
}

// TestHistory round-trips history lines and checks the spread table.
func TestHistory(t *testing.T) {
	path := t.TempDir() + "/history.jsonl"
	for i, ratio := range []float64{0.9, 1.1, 1.0} {
		h := HistoryEntry{Commit: "c" + string(rune('0'+i)), CPU: "X", CPUs: 2, Kernel: "6.18", Load: "1 1 1",
			XDP:     []HistoryXDP{{Case: "rxdrop 64 B", CMpps: 1, GoMpps: ratio, Ratio: ratio, CProgCPU: 1, GoProgCPU: 2}},
			Grid:    &HistoryGrid{Passed: 39 + i, Cells: 40},
			Deliver: &Deliver{Sizes: []int{64, 256, 512}, CopyKeep: []float64{0.9, ratio, 1.1}}}
		if i == 2 {
			h.XDPKitArgs = []string{"--thread"}
		}
		if err := appendHistory(path, h); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := readHistory(path)
	if err != nil || len(hs) != 3 {
		t.Fatalf("%d entries, %v", len(hs), err)
	}
	var b strings.Builder
	writeHistory(&b, hs)
	for _, want := range []string{"across the 3 kept runs", "| rxdrop 64 B | 3 | 1.000 / 1.000 / 1.000 | 0.900 / 1.000 / 1.100 | 0.900 / 1.000 / 1.100 | 2.000 / 2.000 / 2.000 |",
		"cells passed per run: 39/40, 40/40, 41/40", "| 256 | 3 | 0.900 / 1.000 / 1.100 |",
		"copy is not slower than keep up to 256 B", " c1  (1 1 1); c2  (1 1 1; xdpkitbench --thread);"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("history lacks %q:\n%s", want, b.String())
		}
	}
}

func TestReport(t *testing.T) {
	defer func(a []string) { goArgs = a }(goArgs)
	goArgs = []string{"--runtime-sleep"}
	r := &Results{
		Machine: Machine{CPU: "Test CPU", CPUs: 2, Kernel: "6.18", Go: "go1.26", Commit: "abc"},
		Runs:    5, Seconds: 2, Pinned: true,
		XDP: []XDPCase{{Mode: "txonly", Size: 64, Strategy: "sender",
			C: []XDPRun{{Mpps: 2}, {Mpps: 2.2}}, Go: []XDPRun{{Mpps: 1}, {Mpps: 1.1}},
			CSum: RunSummary{Mpps: 2.1, CPUsPerM: []CPUTime{{User: 1, Sys: 2, Softirq: 3}}}, GoSum: RunSummary{Mpps: 1.05, ProgPerM: CPUTime{User: 0.25, Sys: 0.5, Exec: 0.7}},
			CMedian: 2.1, GoMedian: 1.05, Ratio: 0.5}},
		Micro: []MicroResult{
			{Lang: "go", Bench: "sum", Impl: "default", Size: 1500, Ns: 12, GBps: 125},
			{Lang: "c", Bench: "sum", Impl: "avx2", Size: 1500, Ns: 24, GBps: 62.5},
		},
		Grid: &Grid{Rounds: 3, Tolerance: 0.03, Cells: []GridCell{
			{Layout: "seen", Size: 64, Offload: true, Best: "copy", Auto: "copy", Ratio: 1, Pass: true,
				Methods: map[string]Figure{"copy": {10, 9}, "nt": {8, 7}, "fused": {6, 5}, "auto": {10, 9}}},
			{Layout: "unseen", Size: 64, Cold: true, Best: "fused", Auto: "nt+sum", Ratio: 0.9,
				Methods: map[string]Figure{"copy+sum": {5, 4}, "nt+sum": {4, 3}, "fused": {6, 5}, "auto": {4, 3}}},
		}},
	}
	out := report(r)
	for _, want := range []string{
		"at commit abc on Test CPU", "| txonly 64 B sender | C | 2.100 |  | 0.00% | 0 | 0.000 | - | 1.000/2.000/3.000 |",
		"| txonly 64 B sender | xdpkit | 1.050 | 0.50 | 0.00% | 0 | 0.700 | - |", "default 12 ns (125.0 GB/s)",
		"avx2 24 ns (62.5 GB/s)", "FAIL (1 of 2 cells pass)", "| seen | 64 | hot | offload | 7.0 (8.0) | **9.0 (10.0)** | 5.0 (6.0) | - |",
		"| unseen | 64 | cold | no-offload |", "| 0.900 | FAIL |",
		"xdpkit's receiver and forwarders ran with `--runtime-sleep` (`--runtime-sleep` is rxpath.Config.RuntimeSleep",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestTrialAllocs checks that a trial allocates nothing, auto included:
// auto must pay nothing a fixed method does not.
func TestTrialAllocs(t *testing.T) {
	mem := make([]byte, 1<<20)
	src := make([]byte, 64+srcSpan)
	reg := newRegion(mem, 64, 4096, 42)
	for _, auto := range []bool{false, true} {
		n := testing.AllocsPerRun(3, func() { trial(reg, src, 64, byMethod[txpath.MethodCopy], auto, false, true) })
		if n != 0 {
			t.Errorf("auto=%v: %v allocations per trial", auto, n)
		}
	}
}

// TestParseDeliver reads BenchmarkDeliver's output of two rounds and
// derives the threshold from the paired ratios: the largest size up to
// which copy is not slower than keep in the median round.
func TestParseDeliver(t *testing.T) {
	r1 := []byte(`BenchmarkDeliver/copy/64-2 	1000	10.0 ns/op
BenchmarkDeliver/keep/64-2 	1000	20.0 ns/op
BenchmarkDeliver/copy/256 	1000	19.0 ns/op
BenchmarkDeliver/keep/256 	1000	20.0 ns/op
BenchmarkDeliver/copy/512-2 	1000	30.0 ns/op
BenchmarkDeliver/keep/512-2 	1000	20.0 ns/op
BenchmarkDeliver/copy/1500-2 	1000	10.0 ns/op
BenchmarkDeliver/keep/1500-2 	1000	20.0 ns/op
`)
	r2 := []byte(`BenchmarkDeliver/copy/64-2 	1000	12.0 ns/op
BenchmarkDeliver/keep/64-2 	1000	12.0 ns/op
BenchmarkDeliver/copy/256 	1000	40.0 ns/op
BenchmarkDeliver/keep/256 	1000	50.0 ns/op
BenchmarkDeliver/copy/512-2 	1000	30.0 ns/op
BenchmarkDeliver/keep/512-2 	1000	20.0 ns/op
BenchmarkDeliver/copy/1500-2 	1000	10.0 ns/op
BenchmarkDeliver/keep/1500-2 	1000	20.0 ns/op
`)
	d, err := parseDeliver([][]byte{r1, r2})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Sizes, []int{64, 256, 512, 1500}) || d.Ns["copy"][0] != 11 || d.CopyKeep[0] != 0.75 || d.Threshold != 256 {
		t.Errorf("%+v", d)
	}
}

// TestWakeReport checks the wake-up table: CPU per wake-up from each
// run's totals, min / median / max by waiter, Go/C of the medians and the
// spread over the pairs as they ran (either first).
func TestWakeReport(t *testing.T) {
	w := &Wake{Count: 100, GapNs: 200000, Pinned: true, GenCPU: 0, MeasCPU: 1, Runs: []WakeRun{
		{Impl: "c", Wakes: 100, Bytes: 100, CPUNs: 800000, CtxSwitches: 100},
		{Impl: "go", Wakes: 100, Bytes: 100, CPUNs: 1000000, CtxSwitches: 100},
		{Impl: "go", Wakes: 100, Bytes: 100, CPUNs: 1200000, CtxSwitches: 200},
		{Impl: "c", Wakes: 50, Bytes: 100, CPUNs: 500000, CtxSwitches: 50},
		{Impl: "c", Wakes: 100, Bytes: 100, CPUNs: 600000, CtxSwitches: 100},
		{Impl: "go", Wakes: 90, Bytes: 100, CPUNs: 810000, CtxSwitches: 90},
	}}
	if got := w.Runs[3].PerWake(); got != 10 {
		t.Errorf("PerWake = %v µs, want 10", got)
	}
	check := func(wants ...string) {
		t.Helper()
		var b strings.Builder
		writeWake(&b, w)
		for _, want := range wants {
			if !strings.Contains(b.String(), want) {
				t.Errorf("report lacks %q:\n%s", want, b.String())
			}
		}
	}
	check("a waiter on CPU 1 sleeps until a pipe is readable, woken by a writer on CPU 0 that writes 100 bytes",
		"| C, poll(2) | 3 | 50-100 | 6.00 / 8.00 / 10.00 | 1.00 |",
		"| Go, runtime poller | 3 | 90-100 | 9.00 / 10.00 / 12.00 | 1.00 |",
		"Go/C of the medians: 1.25 (+2.00 µs per wake-up); spread 1.20-1.50.")

	// Three waiters per round (since Config.Thread), in rotated order.
	w.Runs = []WakeRun{
		{Impl: "c", Wakes: 100, CPUNs: 800000}, {Impl: "go", Wakes: 100, CPUNs: 1000000}, {Impl: "go-thread", Wakes: 100, CPUNs: 700000},
		{Impl: "go", Wakes: 100, CPUNs: 1200000}, {Impl: "go-thread", Wakes: 100, CPUNs: 900000}, {Impl: "c", Wakes: 50, CPUNs: 500000},
		{Impl: "go-thread", Wakes: 100, CPUNs: 500000}, {Impl: "c", Wakes: 100, CPUNs: 600000}, {Impl: "go", Wakes: 90, CPUNs: 810000},
	}
	check("| C, poll(2) | 3 | 50-100 | 6.00 / 8.00 / 10.00 |",
		"| Go, runtime poller | 3 | 90-100 | 9.00 / 10.00 / 12.00 |",
		"| Go, ppoll on its thread (rxpath.Poller while packets flow) | 3 | 100-100 | 5.00 / 7.00 / 9.00 |",
		"Go/C of the medians: 1.25 (+2.00 µs per wake-up); spread 1.20-1.50.",
		"Go thread/C of the medians: 0.88 (-1.00 µs per wake-up); spread 0.83-0.90.")
}

// TestWakeSplitReport: the per-wake-up table of the fixed-rate rxdrop
// rows, medians over the runs that have the figures.
func TestWakeSplitReport(t *testing.T) {
	run := func(wakeups uint64, busiest, others float64) XDPRun {
		return XDPRun{Frames: 200000, Seconds: 2, Wakeups: wakeups,
			Threads: &ThreadSplit{Threads: 5, Busiest: busiest, Others: others, Slices: int64(wakeups) + 200}}
	}
	c := XDPCase{Mode: "rxdrop", Size: 64, Rate: 100000, NAPIDeferral: true,
		C:  []XDPRun{run(5000, 0.075, 0), run(5000, 0.08, 0), run(4000, 0.08, 0), {Frames: 1}},
		Go: []XDPRun{run(5000, 0.1, 0.005), run(5000, 0.1, 0.005), run(5000, 0.2, 0.01)}}
	for i, n := range []uint64{600, 500, 700} {
		c.Go[i].Naps = n
	}
	fwd := XDPCase{Mode: "fwd", Size: 64, Rate: 100000, C: []XDPRun{run(5000, 0.1, 0)}, Go: []XDPRun{run(5000, 0.1, 0)}}
	out := report(&Results{Machine: Machine{CPUs: 2}, Runs: 3, Seconds: 2, XDP: []XDPCase{c, fwd}})
	for _, want := range []string{
		"| rxdrop 64 B @ 100 kpps, NAPI deferral | C | 2500 | 0 | 2600 | 40.0 | 16.00 | 0.00 | 5 |",
		"| rxdrop 64 B @ 100 kpps, NAPI deferral | xdpkit | 2500 | 300 | 2600 | 40.0 | 20.00 | 1.00 | 5 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| fwd 64 B @ 100 kpps | C | 2500 |") {
		t.Errorf("a fwd row in the wake-up table (a forwarder's wake-ups also serve its TX):\n%s", out)
	}
}

// TestGenReport: the xdpgen table has one row per mode, with its flags,
// median and runs.
func TestGenReport(t *testing.T) {
	var b strings.Builder
	writeGen(&b, []GenCase{{Name: "tcp-syn 74 B", Args: []string{"-mode", "tcp-syn"}, Size: 74, Median: 1.5,
		Runs: []GenRun{{Mpps: 1.4}, {Mpps: 1.5}, {Mpps: 1.6, Loss: 0.01}}}})
	want := "| tcp-syn 74 B | `-mode tcp-syn` | 74 B | 1.500 | 1.400, 1.500, 1.600 | 1.00% |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("report:\n%s\nwant a row %s", b.String(), want)
	}
}
