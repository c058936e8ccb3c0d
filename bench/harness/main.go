package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

const defaultParts = "xdp,micro,deliver,grid,wake,gen,latency"

// config is the command line.
type config struct {
	out     string
	readme  string
	repo    string
	quick   bool
	runs    int
	seconds int
	only    string
	modes   string
	bin     string
	match   *regexp.Regexp
	pin     bool
	genCPU  int
	measCPU int
}

// Results is results.json.
type Results struct {
	Machine Machine   `json:"machine"`
	Started time.Time `json:"started"`
	Elapsed float64   `json:"elapsed_seconds"`
	Quick   bool      `json:"quick"`
	Runs    int       `json:"runs"`
	Seconds int       `json:"seconds_per_run"`
	Pinned  bool      `json:"pinned"`

	XDP   []XDPCase     `json:"xdp,omitempty"`
	Micro []MicroResult `json:"micro,omitempty"`
	Grid  *Grid         `json:"grid,omitempty"`
	// Deliver is rxpath's BenchmarkDeliver, which sets the copy threshold.
	Deliver *Deliver `json:"deliver,omitempty"`
	// Wake is the wake-up cost comparison (wake.go).
	Wake *Wake `json:"wake,omitempty"`
	// Gen is xdpgen's modes, TX only (genbench.go).
	Gen []GenCase `json:"xdpgen,omitempty"`
	// Latency is the one-way delay rows (latency.go).
	Latency *Latency `json:"latency,omitempty"`

	// Paired is csum's Go/C comparison in one process (paired.go).
	Paired []PairedResult `json:"paired,omitempty"`

	// History is history.jsonl with this run last (for the report; not
	// in results.json).
	History []HistoryEntry `json:"-"`
}

// Machine says where the figures were measured.
type Machine struct {
	CPU    string `json:"cpu"`
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	GCC    string `json:"gcc"`
	Date   string `json:"date"`
	Load   string `json:"loadavg"`
	// Commit is the repository's HEAD, with "+changes" when the work tree
	// differs from it.
	Commit string `json:"commit"`
}

func main() {
	var c config
	flag.StringVar(&c.out, "out", "../out", "directory for results.json, the plots and summary.md")
	flag.StringVar(&c.repo, "repo", "", "root of the xdpkit repository (default: found from the working directory)")
	flag.StringVar(&c.readme, "readme", "", "write the short summary (readme.go) into this README between the bench markers")
	flag.BoolVar(&c.quick, "quick", false, "run every case once, briefly (CI)")
	flag.IntVar(&c.runs, "runs", 5, "measured runs of each AF_XDP case and implementation")
	flag.IntVar(&c.seconds, "seconds", 2, "length of one AF_XDP run")
	flag.StringVar(&c.only, "only", defaultParts, "parts to run: xdp, micro, deliver, grid, wake, gen, latency (comma-separated)")
	flag.StringVar(&c.modes, "modes", defaultModes, "AF_XDP modes to run: txonly, rxdrop, fwd, hairpin, l3fwd (comma-separated)")
	match := flag.String("match", "", "run only the AF_XDP and latency cases whose name (e.g. \"fwd 64 B at 100 kpps\", \"latency 300 kpps napi=off\") matches this regular expression")
	flag.StringVar(&c.bin, "bin", "", "build the benchmark programs into this directory and keep them (default: a temporary one), e.g. for perf report")
	flag.IntVar(&niceness, "nice", 0, "run the AF_XDP programs (both implementations) at this nice level, e.g. -10 on a machine shared with other work")
	flag.StringVar(&onlyImpl, "impl", "", "run only this implementation of the AF_XDP cases (c, xdpkit or xsksample), e.g. to profile it; default all")
	goargs := flag.String("goargs", "", "extra arguments (space-separated) for xdpkitbench as the measured receiver or forwarder, e.g. --max-delay=100us; a run with them is not kept in history.jsonl")
	render := flag.Bool("render", false, "measure nothing: write summary.md (and -readme) again from -out's results.json and history.jsonl, e.g. after a change to the report")
	flag.BoolVar(&c.pin, "pin", true, "pin the generator/peer to CPU 0 and the measured program to CPU 1")
	flag.Parse()
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			fatalf("-match: %v", err)
		}
		c.match = re
	}
	goArgs = strings.Fields(*goargs)
	if len(goArgs) > 0 && c.readme != "" {
		fatalf("-goargs with -readme: README's figures are those of make bench's own arguments")
	}
	c.genCPU, c.measCPU = 0, 1
	if runtime.NumCPU() < 2 {
		c.measCPU = 0
	}
	if c.quick {
		c.runs, c.seconds = 1, 1
	}
	if c.runs < 1 || c.seconds < 1 || c.seconds > 60 {
		fatalf("-runs must be positive and -seconds 1..60")
	}
	if *render {
		if err := rerender(&c); err != nil {
			fatalf("%v", err)
		}
		return
	}
	if err := run(&c); err != nil {
		fatalf("%v", err)
	}
}

// rerender writes the summary of the last run again, from results.json.
func rerender(c *config) error {
	b, err := os.ReadFile(filepath.Join(c.out, "results.json"))
	if err != nil {
		return err
	}
	res := &Results{}
	if err := json.Unmarshal(b, res); err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	if res.History, err = readHistory(filepath.Join(c.out, "history.jsonl")); err != nil {
		return err
	}
	if g := res.Grid; g != nil && g.Calib.Source == "" {
		// results.json does not keep where the calibration came from: the
		// run saved it beside results.json (grid.go).
		g.Calib.Source = filepath.Join(c.out, "nt-calibration.json")
		abs, err := filepath.Abs(g.Calib.Source)
		if repo, rerr := findRepo(); err == nil && rerr == nil {
			if rel, err := filepath.Rel(repo, abs); err == nil && filepath.IsLocal(rel) {
				g.Calib.Source = rel
			}
		}
	}
	summary := report(res)
	fmt.Print(summary)
	if err := os.WriteFile(filepath.Join(c.out, "summary.md"), []byte(summary), 0o644); err != nil {
		return err
	}
	if c.readme != "" {
		return writeReadme(c.readme, readmeReport(res))
	}
	return nil
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "harness: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(c *config) error {
	start := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if c.repo == "" {
		r, err := findRepo()
		if err != nil {
			return err
		}
		c.repo = r
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	out, err := filepath.Abs(c.out)
	if err != nil {
		return err
	}
	c.out = out
	parts := strings.Split(c.only, ",")
	mach := machine()
	mach.Commit = commit(c.repo)
	res := &Results{Machine: mach, Started: start.UTC(), Quick: c.quick, Runs: c.runs, Seconds: c.seconds, Pinned: c.pin}
	logf("harness: %s, %d CPUs, kernel %s, %s; quick=%v runs=%d seconds=%d pinned=%v",
		res.Machine.CPU, res.Machine.CPUs, res.Machine.Kernel, res.Machine.Go, c.quick, c.runs, c.seconds, c.pin)

	bin := c.bin
	if bin == "" {
		if bin, err = os.MkdirTemp("", "xdpkit-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(bin)
	} else if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}

	// The grid first: it needs the machine quiet, and nothing of ours runs
	// yet.
	if slices.Contains(parts, "grid") {
		g, err := runGrid(ctx, c)
		if err != nil {
			return fmt.Errorf("grid: %w", err)
		}
		res.Grid = g
	}
	if slices.Contains(parts, "micro") {
		m, err := runMicro(ctx, c, bin)
		if err != nil {
			return fmt.Errorf("micro-benchmarks: %w", err)
		}
		res.Micro = m
		p, err := runPaired(ctx, c, bin)
		if err != nil {
			return fmt.Errorf("micro-benchmarks, paired: %w", err)
		}
		res.Paired = p
	}
	if slices.Contains(parts, "deliver") {
		d, err := runDeliver(ctx, c, bin)
		if err != nil {
			return fmt.Errorf("deliver: %w", err)
		}
		res.Deliver = d
	}
	if slices.Contains(parts, "wake") {
		w, err := runWake(ctx, c, bin)
		if err != nil {
			return fmt.Errorf("wake: %w", err)
		}
		res.Wake = w
	}
	if slices.Contains(parts, "xdp") {
		x, err := runXDP(ctx, c, bin)
		if err != nil {
			return fmt.Errorf("AF_XDP: %w", err)
		}
		res.XDP = x
	}
	if slices.Contains(parts, "gen") {
		g, err := runGen(ctx, c, bin)
		res.Gen = g
		if err != nil {
			return fmt.Errorf("xdpgen: %w", err)
		}
	}
	if slices.Contains(parts, "latency") {
		l, err := runLatency(ctx, c, bin)
		res.Latency = l
		if err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	res.Elapsed = time.Since(start).Seconds()

	// history.jsonl: every full run appends its line (quick runs measure
	// too little to keep).
	hpath := filepath.Join(c.out, "history.jsonl")
	if res.History, err = readHistory(hpath); err != nil {
		return err
	}
	if !c.quick && c.only == defaultParts && c.modes == defaultModes && c.match == nil && onlyImpl == "" && len(goArgs) == 0 {
		h := historyOf(res)
		if err := appendHistory(hpath, h); err != nil {
			return err
		}
		res.History = append(res.History, h)
	}

	summary := report(res)
	fmt.Print(summary)
	if err := os.WriteFile(filepath.Join(c.out, "summary.md"), []byte(summary), 0o644); err != nil {
		return err
	}
	if c.readme != "" {
		if err := writeReadme(c.readme, readmeReport(res)); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := plots(res, c.out); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	fmt.Printf("\nwrote %s/{results.json,summary.md,xdp.png,copy.png}\nelapsed: %.1f s\n", c.out, res.Elapsed)
	// Quick mode measures too little to judge; it only keeps the
	// benchmarks from rotting, and never fails on a verdict.
	if c.quick {
		return nil
	}
	return verdictErr(res)
}

// verdictErr is make bench's exit status: an error only for a real miss,
// a grid cell behind beyond the tolerance and the run's noise band in most
// of its starts, or a goal missed beyond its spread.
func verdictErr(res *Results) error {
	var errs []error
	if res.Grid != nil && !res.Grid.Pass {
		errs = append(errs, errors.New("copy-policy grid: auto is behind a fixed method by more than 3% and the run's noise band in most starts of some cell (FAIL beyond noise)"))
	}
	if n := missedGoals(allTargets(res)); n > 0 {
		errs = append(errs, fmt.Errorf("efficiency goals: %d missed beyond their spread", n))
	}
	return errors.Join(errs...)
}

// findRepo walks up from the working directory to the xdpkit module root.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/xdpkit/xdpkit\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the xdpkit repository (use -repo)")
		}
		dir = parent
	}
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if b, err := exec.Command("gcc", "-dumpfullversion").Output(); err == nil {
		m.GCC = strings.TrimSpace(string(b))
	}
	return m
}

// commit describes the repository's state: HEAD's short hash, and
// "+changes" when the work tree differs from it.
func commit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+changes"
	}
	return c
}

// median of v (0 for none); v is not modified.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
