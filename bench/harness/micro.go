package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// MicroResult is one micro-benchmark figure: the best time per operation
// and the bandwidth it gives.
type MicroResult struct {
	Lang  string  `json:"lang"`  // "go" or "c"
	Bench string  `json:"bench"` // "sum", "copy_and_sum", "copy"
	Where string  `json:"where,omitempty"`
	Impl  string  `json:"impl"`
	Size  int     `json:"size"`
	Ns    float64 `json:"ns"`
	GBps  float64 `json:"gbps"`
	// Name is the Go benchmark's name.
	Name string `json:"name,omitempty"`
}

// goBench is a set of Go benchmarks and how to label what they print.
type goBench struct {
	pkg     string
	pattern string
	label   func(name string) (bench, where, impl string, size int, ok bool)
	// short: many short runs (-benchtime 5000x, -count 25), best of them,
	// as csumbench's 400 rounds of 50 µs: on a shared machine only short
	// runs find undisturbed moments, and C and Go get the same chance.
	short bool
}

// csumSizes are the sizes of the csum micro-benchmarks, Go and C: the
// short ones of headers and small packets, an MTU, a page and 64 KiB.
var csumSizes = []string{"20", "64", "128", "256", "1500", "4096", "65536"}

var goBenches = []goBench{
	// Sum and CopyAndSum with the default kernels, on buffers that start
	// 2048 bytes into a page, and at 4096 and 65536 bytes also on buffers
	// that end at a page whose next page is not present ("page-end").
	{"csum", `^Benchmark(Sum|CopyAndSum)$/^(` + strings.Join(csumSizes, "|") + `)$/^mid-page$`, layoutLabel, true},
	{"csum", `^Benchmark(Sum|CopyAndSum)$/^(4096|65536)$/^page-end$`, layoutLabel, true},
	// Each kernel set forced, to set beside the C kernel of the same kind:
	// adc (scalar add-with-carry chain), avx2, avx512 (where the CPU has
	// it: a set the CPU lacks is not listed, so it prints nothing).
	{"csum", `^BenchmarkSumImpl$/^(adc|avx2|avx512)$/^(` + strings.Join(csumSizes, "|") + `)$`, implLabel, true},
	{"csum", `^BenchmarkCopyAndSumImpl$/^(avx2|avx512)$/^(1500|65536)$`, implLabel, true},
	{"nt", `^BenchmarkCopy$/^(hot|ring)$/^(copy|nt)$/^(1500B|64KiB)$`, func(n string) (string, string, string, int, bool) {
		f := strings.Split(n, "/")
		if len(f) != 4 {
			return "", "", "", 0, false
		}
		s := map[string]int{"1500B": 1500, "64KiB": 65536}[f[3]]
		im := map[string]string{"copy": "copy", "nt": "nt"}[f[2]]
		return "copy", f[1], im, s, s > 0
	}, false},
	{"nt", `^BenchmarkImpl$/^avx2$/^64KiB$`, func(n string) (string, string, string, int, bool) {
		f := strings.Split(n, "/")
		if len(f) != 3 {
			return "", "", "", 0, false
		}
		return "copy", "ring", "nt-" + f[1], 65536, true
	}, false},
}

// layoutLabel labels BenchmarkSum and BenchmarkCopyAndSum results
// (size/layout): "default", or "default page-end".
func layoutLabel(n string) (string, string, string, int, bool) {
	f := strings.Split(n, "/")
	if len(f) != 3 {
		return "", "", "", 0, false
	}
	s, _ := strconv.Atoi(f[1])
	b := map[string]string{"BenchmarkSum": "sum", "BenchmarkCopyAndSum": "copy_and_sum"}[f[0]]
	im := "default"
	if f[2] != "mid-page" {
		im += " " + f[2]
	}
	return b, "", im, s, b != ""
}

// implLabel labels BenchmarkSumImpl and BenchmarkCopyAndSumImpl results
// with their kernel set.
func implLabel(n string) (string, string, string, int, bool) {
	f := strings.Split(n, "/")
	if len(f) != 3 {
		return "", "", "", 0, false
	}
	s, _ := strconv.Atoi(f[2])
	b := map[string]string{"BenchmarkSumImpl": "sum", "BenchmarkCopyAndSumImpl": "copy_and_sum"}[f[0]]
	return b, "", f[1], s, b != ""
}

func runMicro(ctx context.Context, c *config, dir string) ([]MicroResult, error) {
	cpu := -1
	if c.pin {
		cpu = c.measCPU
	}
	benchtime, count := "200ms", "5"
	shortTime, shortCount := "5000x", "25"
	ct, cr := "50", "5"
	cu, cur := "50", "400" // csumbench: 400 rounds of 50 µs per kernel and size
	if c.quick {
		benchtime, count = "20ms", "1"
		shortTime, shortCount = "500x", "2"
		ct, cr = "5", "1"
		cu, cur = "50", "20"
	}
	var res []MicroResult
	// Go: compile each package's test binary once, run it pinned.
	bins := map[string]string{}
	for _, pkg := range []string{"csum", "nt"} {
		bin := filepath.Join(dir, pkg+".test")
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./"+pkg)
		cmd.Dir = c.repo
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go test -c ./%s: %w\n%s", pkg, err, b)
		}
		bins[pkg] = bin
	}
	for _, gb := range goBenches {
		logf("micro: go %s -bench %s", gb.pkg, gb.pattern)
		bt, n := benchtime, count
		if gb.short {
			bt, n = shortTime, shortCount
		}
		args := []string{bins[gb.pkg], "-test.run", "^$", "-test.bench", gb.pattern,
			"-test.benchtime", bt, "-test.count", n, "-test.benchmem"}
		out, err := pinned(ctx, cpu, filepath.Join(c.repo, gb.pkg), args...)
		if err != nil {
			return res, err
		}
		best := map[string]MicroResult{}
		var order []string
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
				continue
			}
			name := f[0]
			if i := strings.LastIndex(name, "-"); i > 0 {
				if _, err := strconv.Atoi(name[i+1:]); err == nil {
					name = name[:i] // the GOMAXPROCS suffix
				}
			}
			ns, err := strconv.ParseFloat(f[2], 64)
			if err != nil || ns <= 0 {
				continue
			}
			bench, where, im, size, ok := gb.label(name)
			if !ok {
				continue
			}
			r := MicroResult{Lang: "go", Bench: bench, Where: where, Impl: im, Size: size, Ns: ns, GBps: float64(size) / ns, Name: name}
			old, seen := best[name]
			if !seen {
				order = append(order, name)
			}
			if !seen || r.Ns < old.Ns {
				best[name] = r
			}
		}
		if len(order) == 0 {
			return res, fmt.Errorf("go %s -bench %s: no results\n%s", gb.pkg, gb.pattern, out)
		}
		for _, n := range order {
			res = append(res, best[n])
		}
	}
	// C: build with build.sh (csumbench -O3 -march=native, ntbench -O2
	// -mavx2) and run pinned. csumbench runs many short rounds, which find
	// undisturbed ones on a shared machine.
	for _, prog := range []string{"csumbench", "ntbench"} {
		bin := filepath.Join(dir, prog)
		if err := buildC(ctx, c, prog, bin); err != nil {
			return res, err
		}
		logf("micro: %s", prog)
		args := []string{bin, "-t", ct, "-r", cr, "1500", "65536"}
		if prog == "csumbench" {
			args = append([]string{bin, "-u", cu, "-r", cur}, csumSizes...)
		}
		out, err := pinned(ctx, cpu, dir, args...)
		if err != nil {
			return res, err
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var r MicroResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return res, fmt.Errorf("%s: %w: %s", prog, err, sc.Text())
			}
			r.Lang = "c"
			res = append(res, r)
		}
	}
	return res, nil
}

// onCPU is argv run on cpu: behind taskset, or as is when cpu < 0.
func onCPU(cpu int, argv ...string) []string {
	if cpu < 0 {
		return argv
	}
	return append([]string{"taskset", "-c", strconv.Itoa(cpu)}, argv...)
}

// buildC builds the C program prog of bench/c into out with build.sh.
func buildC(ctx context.Context, c *config, prog, out string) error {
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(c.repo, "bench/c/build.sh"), prog)
	cmd.Env = append(cmd.Environ(), "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", prog, err, b)
	}
	return nil
}

// buildGo builds the Go command pkg (relative to the repository) into out.
func buildGo(ctx context.Context, c *config, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = c.repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// pinned runs a command on cpu (taskset; none when cpu < 0) in dir.
func pinned(ctx context.Context, cpu int, dir string, argv ...string) ([]byte, error) {
	argv = onCPU(cpu, argv...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %w\n%s%s", strings.Join(argv, " "), err, out, stderr.Bytes())
	}
	return out, nil
}
