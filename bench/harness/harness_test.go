package main

import (
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
	for _, size := range []int{64, 1500, 4096, 20000} {
		r := newRegion(mem, size)
		seen := map[int]bool{}
		for i := 0; i < 3*r.slots; i++ {
			d := r.dst(size)
			if len(d) != size {
				t.Fatalf("size %d: dst of %d bytes", size, len(d))
			}
			off := int(uintptrOf(d) - uintptrOf(mem))
			if off%frameSize != payloadOff || off+size > len(mem) {
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
	c := measureCell(newRegion(mem, 1500), src, 1500, false, true, 3)
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
	if c.Pass != (c.Ratio >= 1-gridTolerance) {
		t.Errorf("pass %v with ratio %v", c.Pass, c.Ratio)
	}
}

func TestReport(t *testing.T) {
	r := &Results{
		Machine: Machine{CPU: "Test CPU", CPUs: 2, Kernel: "6.18", Go: "go1.26", Commit: "abc"},
		Runs:    5, Seconds: 2, Pinned: true,
		XDP: []XDPCase{{Mode: "txonly", Size: 64, C: []float64{2, 2.2}, Go: []float64{1, 1.1}, CMedian: 2.1, GoMedian: 1.05, Ratio: 0.5, GoMallocs: []uint64{0, 0}}},
		Micro: []MicroResult{
			{Lang: "go", Bench: "sum", Impl: "default", Size: 1500, Ns: 12, GBps: 125},
			{Lang: "c", Bench: "sum", Impl: "avx2", Size: 1500, Ns: 24, GBps: 62.5},
		},
		Grid: &Grid{Rounds: 3, Tolerance: 0.03, Cells: []GridCell{
			{Size: 64, Offload: true, Best: "copy", Auto: "copy", Ratio: 1, Pass: true,
				Methods: map[string]Figure{"copy": {10, 9}, "nt": {8, 7}, "fused": {6, 5}, "auto": {10, 9}}},
			{Size: 64, Cold: true, Best: "fused", Auto: "nt+sum", Ratio: 0.9,
				Methods: map[string]Figure{"copy+sum": {5, 4}, "nt+sum": {4, 3}, "fused": {6, 5}, "auto": {4, 3}}},
		}},
	}
	out := report(r)
	for _, want := range []string{
		"at commit abc on Test CPU", "| txonly | 64 B | 2.100 | 1.050 | 0.50 |", "default 12 ns (125.0 GB/s)",
		"avx2 24 ns (62.5 GB/s)", "FAIL (1 of 2 cells pass)", "| 64 | hot | offload | 8.0 (7.0) | **10.0 (9.0)** |",
		"| 64 | cold | no-offload |", "| 0.900 | FAIL |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
