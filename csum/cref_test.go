//go:build csumcgo && amd64 && linux

package csum

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/xdpkit/xdpkit/csum/internal/cref"
)

var (
	pairedRounds = flag.Int("paired.rounds", 2000, "TestPairedC: blocks per function and size")
	pairedSizes  = flag.String("paired.sizes", "20,64,72,104,128,200,256,264,300,320,512,1000,1024,1032,1499,1500,4096,65536", "TestPairedC: sizes in bytes")
	pairedImpls  = flag.Bool("paired.impls", false, "TestPairedC: also time Sum with each kernel set forced (adc, avx2)")
	pairedLayout = flag.String("paired.layout", "mid-page", "TestPairedC: where the buffers lie (see layouts: mid-page, page-aligned, page-end)")
)

// PairedRow is one line of TestPairedC's output, after "PAIRED ": a Go
// function against the fastest of the C kernels of its kind, timed in
// alternating blocks of one process. Ratio is C's time over Go's
// (above 1: Go is faster), taken per block against the faster C kernel of
// that block; the row gives its median and its 10th and 90th
// percentiles. The ns figures are medians (and minima) per call over the
// blocks. bench/harness parses these lines (make bench's paired table).
type PairedRow struct {
	Bench  string             `json:"bench"` // "sum" or "copy_and_sum"
	Size   int                `json:"size"`
	Blocks int                `json:"blocks"`
	Reps   int                `json:"reps"` // calls per block
	GoNs   float64            `json:"go_ns"`
	GoMin  float64            `json:"go_min_ns"`
	CNs    float64            `json:"c_ns"` // median of the per-block best C
	CMin   float64            `json:"c_min_ns"`
	CBest  string             `json:"c_kernel"` // the C kernel with the lowest median
	Ratio  float64            `json:"ratio"`
	P10    float64            `json:"ratio_p10"`
	P90    float64            `json:"ratio_p90"`
	Kernel map[string]float64 `json:"kernel_ns"` // each function's median, Go and C
}

// TestPairedC times Sum and CopyAndSum beside csumbench's C kernels (adc
// and avx2 for Sum, avx2 copy+sum for CopyAndSum), called through cgo, in
// alternating blocks of one process: per size, -paired.rounds rounds in
// which every function runs one block of the same number of chained calls
// (about 256 KiB of data, 16-4096 calls), in an order that rotates from
// round to round. It prints one PAIRED line (JSON, see PairedRow) per
// function and size, and a table:
//
//	go test -tags csumcgo -c -o /tmp/csum-cref.test ./csum/
//	taskset -c 1 /tmp/csum-cref.test -test.run TestPairedC -test.v
//
// Separate processes minutes apart disagree by 1.25-1.7x on a shared VM;
// blocks a few microseconds apart see the same machine, so their ratio is
// meaningful even when their absolute times are not. It asserts nothing
// (the figures are for make bench and the README), so it is not run
// without the tag.
func TestPairedC(t *testing.T) {
	type fn struct {
		name string
		c    bool // a C kernel
		// run times reps chained calls over buf (and dst), with its
		// timing loop level frames deeper on the stack (see onStack).
		run func(dst, buf []byte, reps, level int) float64
	}
	cfn := func(k int) func(dst, buf []byte, reps, level int) float64 {
		// csumbench's loop keeps the sum in a register: see onStack.
		return func(dst, buf []byte, reps, _ int) float64 { return cref.Time(k, dst, buf, reps) }
	}
	goSum := func(dst, buf []byte, reps, level int) float64 {
		return onStack(level, func() float64 {
			t0 := time.Now()
			sink = sumLoop(buf, reps, sink)
			return float64(time.Since(t0).Nanoseconds())
		})
	}
	if *pairedRounds < 1 {
		t.Fatalf("-paired.rounds %d: at least 1", *pairedRounds)
	}
	forced := func(name string) func(dst, buf []byte, reps, level int) float64 {
		var im impl
		for _, x := range impls {
			if x.name == name {
				im = x
			}
		}
		if im.use == nil {
			t.Fatalf("-paired.impls: this machine has no %s kernel set", name)
		}
		return func(dst, buf []byte, reps, level int) float64 {
			restore := im.use()
			defer restore()
			return goSum(dst, buf, reps, level)
		}
	}
	sumFns := []fn{
		{"C-adc", true, cfn(cref.SumADC)},
		{"C-avx2", true, cfn(cref.SumAVX2)},
		{"Sum", false, goSum},
	}
	if cref.HasAVX512() {
		sumFns = append(sumFns, fn{"C-avx512", true, cfn(cref.SumAVX512)})
	}
	if *pairedImpls {
		sumFns = append(sumFns, fn{"Sum-adc", false, forced("adc")}, fn{"Sum-avx2", false, forced("avx2")})
		if useAVX512 {
			sumFns = append(sumFns, fn{"Sum-avx512", false, forced("avx512")})
		}
	}
	copyFns := []fn{
		{"C-copy-avx2", true, cfn(cref.CopySumAVX2)},
		// C-copy-avx512 is appended below where the CPU has it.
		{"CopyAndSum", false, func(dst, buf []byte, reps, level int) float64 {
			return onStack(level, func() float64 {
				t0 := time.Now()
				sink = copySumLoop(dst, buf, reps, sink)
				return float64(time.Since(t0).Nanoseconds())
			})
		}},
	}
	if cref.HasAVX512() {
		copyFns = append(copyFns, fn{"C-copy-avx512", true, cfn(cref.CopySumAVX512)})
	}
	var sizes []int
	for _, f := range strings.Split(*pairedSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("-paired.sizes: bad size %q", f)
		}
		sizes = append(sizes, n)
	}
	_, levels := stackPlaces()
	var rows []PairedRow
	for _, bench := range []string{"sum", "copy_and_sum"} {
		fns := sumFns
		if bench == "copy_and_sum" {
			fns = copyFns
		}
		for _, n := range sizes {
			buf := layoutBuf(t, layout{*pairedLayout, n})
			dst := layoutBuf(t, layout{*pairedLayout, n})
			for i := range buf {
				buf[i] = byte(i*7 + 3)
			}
			reps := min(max(16, (256<<10)/n), 4096)
			// Per function, per block: ns per call. The first tenth of
			// the rounds (r < 0) warms up.
			// Every function of a round runs at the same stack level,
			// which stays for len(fns) rounds: one per rotation of the
			// order (every function in every position).
			times := make([][]float64, len(fns))
			for r := -*pairedRounds / 10; r < *pairedRounds; r++ {
				level := ((r/len(fns))%levels + levels) % levels
				for i := range fns {
					j := ((i+r)%len(fns) + len(fns)) % len(fns)
					d := fns[j].run(dst, buf, reps, level) / float64(reps)
					if r >= 0 {
						times[j] = append(times[j], d)
					}
				}
			}
			fnNames, isC := make([]string, len(fns)), make([]bool, len(fns))
			for j, f := range fns {
				fnNames[j], isC[j] = f.name, f.c
			}
			rows = append(rows, pairedRow(bench, n, reps, fnNames, isC, times)...)
		}
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "%-12s %6s %9s %9s %-7s %7s %13s\n", "bench", "size", "Go ns", "C ns", "C", "ratio", "p10-p90")
	for _, r := range rows {
		b, _ := json.Marshal(r)
		fmt.Fprintf(os.Stdout, "PAIRED %s\n", b)
		fmt.Fprintf(&tab, "%-12s %6d %9.2f %9.2f %-7s %6.3fx %6.3f-%.3f\n", r.Bench, r.Size, r.GoNs, r.CNs, r.CBest, r.Ratio, r.P10, r.P90)
	}
	t.Log("\n" + tab.String())
}

// pairedRow makes the rows of one size: one for each Go function against
// the per-block best of the C ones (c[j]: function j is a C kernel).
func pairedRow(bench string, n, reps int, fnNames []string, c []bool, times [][]float64) []PairedRow {
	blocks := len(times[0])
	bestC := make([]float64, blocks)
	kernel := map[string]float64{}
	cBest, cBestNs := "", 0.0
	for b := range blocks {
		bestC[b] = 1e18
		for j := range times {
			if c[j] {
				bestC[b] = min(bestC[b], times[j][b])
			}
		}
	}
	for j, nm := range fnNames {
		m := median(times[j])
		kernel[nm] = m
		if c[j] && (cBest == "" || m < cBestNs) {
			cBest, cBestNs = nm, m
		}
	}
	var rows []PairedRow
	for j, nm := range fnNames {
		if c[j] {
			continue
		}
		ratio := make([]float64, blocks)
		for b := range blocks {
			ratio[b] = bestC[b] / times[j][b]
		}
		slices.Sort(ratio)
		row := PairedRow{Bench: bench, Size: n, Blocks: blocks, Reps: reps,
			GoNs: median(times[j]), GoMin: slices.Min(times[j]), CNs: median(bestC), CMin: slices.Min(bestC),
			CBest: strings.TrimPrefix(cBest, "C-"), Ratio: ratio[blocks/2], P10: ratio[blocks/10], P90: ratio[blocks*9/10],
			Kernel: kernel}
		if nm != "Sum" && nm != "CopyAndSum" {
			row.Bench += " " + nm // a forced kernel set: "sum Sum-avx2"
		}
		rows = append(rows, row)
	}
	return rows
}

// Go's timing loops run at as many places on the stack as cover 4 KiB,
// one frame of onStack apart (128 bytes in the default build), each for
// one rotation of the functions' order in turn, because at one fixed place the result of a size can
// hinge on the place. On the development machine (Zen 3), with the buffer
// at mid-page, a 1499-byte Sum took 19.6 ns at most places and 21 to 28
// ns with the loop's frame over the first kilobyte of the buffer's page
// offsets (in one pass over the places; an earlier pass in the same
// process showed no more than 1%). The likely cause: the loop keeps the
// previous sum on the stack across the call (a Go call keeps no general
// register), and a kernel load whose address matches that slot's in the
// low 12 bits is made to wait for the store, whose data is the previous
// call's result, so that the calls stop overlapping. A program's own
// stack can be at any of these places; the blocks now cover them all, and
// the median ratio is not the luck of one (the p10-p90 spread still shows
// a slow place). csumbench's loop (cref.Time) keeps the sum in a
// register, and runs where it always did.

// onStack calls f level frames of its own below the caller's.
//
//go:noinline
func onStack(level int, f func() float64) float64 {
	var pad [96]byte // with the frame's other words: 128 bytes (TestOnStack logs it)
	if level == 0 {
		return f()
	}
	r := onStack(level-1, f)
	// Writes after the call, so that the frame and its pad stay.
	pad[level%len(pad)] = byte(level)
	stackSink += pad[(level+1)%len(pad)]
	return r
}

// stackPlaces returns the bytes between two levels of onStack and how
// many levels cover 4 KiB. It grows the stack first: growing moves it.
func stackPlaces() (step uintptr, levels int) {
	onStack(256, func() float64 { return 0 })
	sp := placesOf(2)
	step = sp[0] - sp[1]
	return step, int((4096 + step - 1) / step)
}

// placesOf returns the address of a local of a function that onStack
// calls at each level 0..n-1.
func placesOf(n int) []uintptr {
	sp := make([]uintptr, n)
	for l := range sp {
		onStack(l, func() float64 {
			sp[l] = spOf()
			return 0
		})
	}
	return sp
}

var stackSink byte

// sumLoop and copySumLoop are the Go timing loops, functions of their own
// as csumbench's (cref_time): the loop keeps only its own values live
// across the calls, and each call takes the previous sum as its initial
// value.
//
//go:noinline
func sumLoop(buf []byte, reps int, s uint32) uint32 {
	for range reps {
		s = Sum(buf, s)
	}
	return s
}

//go:noinline
func copySumLoop(dst, buf []byte, reps int, s uint32) uint32 {
	for range reps {
		s = CopyAndSum(dst, buf, s)
	}
	return s
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestOnStack checks that the levels of onStack that TestPairedC uses are
// evenly spaced and cover 4 KiB of stack places.
func TestOnStack(t *testing.T) {
	step, levels := stackPlaces()
	t.Logf("onStack: %d levels, %d bytes apart", levels, step)
	sp := placesOf(levels)
	for l := 1; l < levels; l++ {
		if d := sp[l-1] - sp[l]; d != step {
			t.Fatalf("level %d is %d bytes below level %d, want %d (stack places: %x)", l, d, l-1, step, sp)
		}
	}
	if span := uintptr(levels) * step; span < 4096 || span-step >= 4096 {
		t.Fatalf("%d levels of %d bytes span %d bytes: want the fewest that cover 4096", levels, step, span)
	}
}

// spOf returns the address of one of its locals.
//
//go:noinline
func spOf() uintptr {
	var x [8]byte
	return uintptr(unsafe.Pointer(&x[0]))
}
