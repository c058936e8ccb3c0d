package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// PairedResult is one row of csum's TestPairedC (build tag csumcgo): a Go
// function and csumbench.c's C kernels of its kind, built into one test
// binary through cgo and timed in alternating blocks of one process.
// Ratio is C's time over Go's per block, against the faster C kernel of
// that block (above 1: Go is faster); P10 and P90 are its 10th and 90th
// percentiles over the blocks. The ns figures are medians per call.
type PairedResult struct {
	Bench  string             `json:"bench"` // "sum", "copy_and_sum"
	Size   int                `json:"size"`
	Blocks int                `json:"blocks"`
	Reps   int                `json:"reps"`
	GoNs   float64            `json:"go_ns"`
	GoMin  float64            `json:"go_min_ns"`
	CNs    float64            `json:"c_ns"`
	CMin   float64            `json:"c_min_ns"`
	CBest  string             `json:"c_kernel"`
	Ratio  float64            `json:"ratio"`
	P10    float64            `json:"ratio_p10"`
	P90    float64            `json:"ratio_p90"`
	Kernel map[string]float64 `json:"kernel_ns,omitempty"`
}

// pairedSizes are the sizes of the paired comparison: csumSizes, the
// sizes between 256 and 1500 where the vector kernel takes over, and three
// that a sweep of 150 sizes from 40 B to 64 KiB found behind the best C
// kernel (TestPairedC with -paired.sizes 40,48,...): 72 and 104 B (65-127 B
// not a multiple of 32) and 1032 B (a tail window past 1024 B).
const pairedSizes = "20,64,72,104,128,200,256,264,300,320,512,1000,1024,1032,1499,1500,4096,65536"

// runPaired builds csum's test binary with the csumcgo tag (csumbench.c's
// kernels through cgo, -O3 -march=native as build.sh) and runs
// TestPairedC pinned, as the micro-benchmarks are.
func runPaired(ctx context.Context, c *config, dir string) ([]PairedResult, error) {
	cpu := -1
	if c.pin {
		cpu = c.measCPU
	}
	rounds := "2000"
	if c.quick {
		rounds = "200"
	}
	bin := filepath.Join(dir, "csum-cref.test")
	cmd := exec.CommandContext(ctx, "go", "test", "-tags", "csumcgo", "-c", "-o", bin, "./csum")
	cmd.Dir = c.repo
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -tags csumcgo -c ./csum: %w\n%s", err, b)
	}
	logf("micro: paired Go/C (TestPairedC, %s blocks per function and size)", rounds)
	out, err := pinned(ctx, cpu, filepath.Join(c.repo, "csum"), bin, "-test.run", "^TestPairedC$", "-test.v",
		"-paired.rounds", rounds, "-paired.sizes", pairedSizes)
	if err != nil {
		return nil, err
	}
	return parsePaired(out)
}

// parsePaired reads TestPairedC's "PAIRED {json}" lines; other lines (the
// test's own log) are skipped. No such line is an error.
func parsePaired(out []byte) ([]PairedResult, error) {
	var res []PairedResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		js, ok := strings.CutPrefix(sc.Text(), "PAIRED ")
		if !ok {
			continue
		}
		var r PairedResult
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			return nil, fmt.Errorf("TestPairedC: %w: %s", err, js)
		}
		if r.Bench == "" || r.Size <= 0 || r.GoNs <= 0 || r.CNs <= 0 || r.Ratio <= 0 {
			return nil, fmt.Errorf("TestPairedC: incomplete row: %s", js)
		}
		res = append(res, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("TestPairedC: no PAIRED lines in its output:\n%s", out)
	}
	return res, nil
}

// writePaired renders the paired rows: one table per function, one
// verdict per size, judged on the median ratio.
func writePaired(b *strings.Builder, rows []PairedResult) {
	if len(rows) == 0 {
		return
	}
	title := map[string]string{"sum": "Sum vs best C", "copy_and_sum": "CopyAndSum vs C copy+sum"}
	var benches []string
	for _, r := range rows {
		if !slices.Contains(benches, r.Bench) {
			benches = append(benches, r.Bench)
		}
	}
	for _, bench := range benches {
		name := title[bench]
		if name == "" {
			name = bench + " vs best C"
		}
		met, n := 0, 0
		for _, r := range rows {
			if r.Bench == bench {
				n++
				if r.Ratio >= 1 {
					met++
				}
			}
		}
		fmt.Fprintf(b, "\n### %s (paired): at least 1.00x at %d of %d sizes\n\n", name, met, n)
		b.WriteString("Go and csumbench.c's kernels (through cgo, -O3 -march=native) in one process, in alternating " +
			"blocks of the same number of chained calls (csum's TestPairedC, build tag csumcgo); Go's timing loop runs at places on the " +
			"stack that cover 4 KiB, each for one rotation of the order in turn, because at one fixed place a size was seen to run slower, probably as its " +
			"saved sum aliased the buffer (see onStack in csum/cref_test.go). " +
			"ratio = best C ns / Go ns per block, against the faster C kernel of each block (above 1: Go is faster); " +
			"median over the blocks, with the 10th-90th percentiles as its spread. " +
			"ns are medians per call (minima in parentheses). The verdict is on the median ratio.\n\n")
		b.WriteString("| size | Go ns | best C ns | C kernel | ratio (median) | p10-p90 | blocks | >= 1.00x |\n")
		b.WriteString("|---:|---:|---:|---|---:|---|---:|---|\n")
		for _, r := range rows {
			if r.Bench != bench {
				continue
			}
			v := "yes"
			if r.Ratio < 1 {
				v = "**no**"
			}
			fmt.Fprintf(b, "| %d B | %.2f (%.2f) | %.2f (%.2f) | %s | %sx | %.3f-%.3f | %d | %s |\n", r.Size, r.GoNs, r.GoMin,
				r.CNs, r.CMin, r.CBest, ratioString(r.Ratio), r.P10, r.P90, r.Blocks, v)
		}
	}
}

// ratioString prints a ratio with three decimals, or more where three
// would round it to 1.000 from either side (the verdict is strict).
func ratioString(r float64) string { return ratioDigits(r, 3) }
