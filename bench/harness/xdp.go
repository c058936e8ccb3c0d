package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/xsk"
)

// XDPCase is one AF_XDP measurement: a mode, frame size, offered rate
// (0: as fast as the sender goes) and TX strategy, with every measured run
// of each implementation.
type XDPCase struct {
	Mode string `json:"mode"`
	Size int    `json:"size"`
	// Rate is the generator's paced rate in frames per second (rxdrop,
	// fwd), 0 for the maximum-rate rows.
	Rate int `json:"rate_pps"`
	// Strategy is the TX strategy of txonly's senders: "sender" (kick
	// after each batch until the kernel took it, txpath.Sender's) or
	// "ring" (keep the ring full, kick when the kernel asks).
	Strategy string `json:"tx_strategy,omitempty"`
	// NAPIDeferral: the receiving veth's NAPIs had napi_defer_hard_irqs
	// napiDefer and gro_flush_timeout napiFlush for both implementations.
	NAPIDeferral bool `json:"napi_deferral,omitempty"`
	// Counted says where the frames of the rate were counted.
	Counted  string     `json:"counted_at"`
	C        []XDPRun   `json:"c"`
	Go       []XDPRun   `json:"xdpkit"`
	CSum     RunSummary `json:"c_summary"`
	GoSum    RunSummary `json:"xdpkit_summary"`
	CMedian  float64    `json:"c_median_mpps"`
	GoMedian float64    `json:"xdpkit_median_mpps"`
	Ratio    float64    `json:"ratio"` // xdpkit / C, of the medians
	// Sample is xsksample (bench/c/xsksample.c, the AF_XDP sample
	// program's shape) in the matching mode, its runs alternated with
	// the others' on the same links (xsksample.go); none where it has no
	// counterpart.
	Sample *SampleRuns `json:"xsksample,omitempty"`
}

// XDPRun is one measured run of one implementation.
type XDPRun struct {
	// Frames were counted at the independent point (Counted); Seconds is
	// the sender's loop (generator or txonly program); Mpps their ratio.
	Frames  uint64  `json:"frames"`
	Seconds float64 `json:"seconds"`
	Mpps    float64 `json:"mpps"`
	// Sent is the sender's completions; Loss = 1 - Frames/Sent.
	Sent uint64  `json:"sent"`
	Loss float64 `json:"loss"`
	// Own is the measured program's own count (frames it transmitted,
	// received or forwarded), for the cross-check.
	Own uint64 `json:"own_count"`
	// XSKDrops is the receiving socket's rx_dropped + rx_ring_full
	// (XDP_STATISTICS; rxdrop and fwd).
	XSKDrops uint64 `json:"xsk_drops"`
	// Unaccounted is Sent - Frames - XSKDrops (rxdrop): frames the
	// generator completed that neither reached the receiver nor show in
	// its socket's drop counters (veth drops them before XDP when its
	// 256-entry ring is full). Negative would mean the receiver counted
	// frames nobody sent.
	Unaccounted int64 `json:"unaccounted"`
	// OfferedMpps is the generator's own completion rate (rxdrop, fwd).
	OfferedMpps float64 `json:"offered_mpps,omitempty"`
	// CPU time over the run, in seconds: the measured program (user,
	// sys tick-sampled, Exec in ns), the generator process (rxdrop, fwd)
	// and every CPU (user, sys, softirq from /proc/stat); *PerM are the
	// same per million Frames.
	Prog     CPUTime   `json:"prog_cpu"`
	Gen      CPUTime   `json:"gen_cpu"`
	CPUs     []CPUTime `json:"cpus"`
	ProgPerM CPUTime   `json:"prog_cpu_s_per_mpkt"`
	GenPerM  CPUTime   `json:"gen_cpu_s_per_mpkt"`
	CPUsPerM []CPUTime `json:"cpus_cpu_s_per_mpkt"`
	// Threads splits Prog.Exec between the measured program's busiest
	// thread and the others (rxdrop, fwd, l3fwd); Wakeups is the
	// program's own count (rxdrop and fwd): the Poller's sleeps that a
	// ready socket ended, xdpbench's polls that found the socket ready
	// (also those that returned without sleeping).
	Threads *ThreadSplit `json:"threads,omitempty"`
	Wakeups uint64       `json:"wakeups,omitempty"`
	// Naps are xdpkitbench's timer sleeps (rxpath's naps; a C receiver
	// takes none): a receiver that naps wakes from them besides.
	Naps uint64 `json:"naps,omitempty"`
	// Mallocs are xdpkitbench's heap allocations in its measured loop.
	Mallocs uint64          `json:"mallocs,omitempty"`
	Raw     json.RawMessage `json:"raw"`
	GenRaw  json.RawMessage `json:"gen_raw,omitempty"`
}

// RunSummary is the median over an implementation's runs of each figure.
type RunSummary struct {
	Mpps        float64   `json:"mpps"`
	Loss        float64   `json:"loss"`
	OfferedMpps float64   `json:"offered_mpps,omitempty"`
	ProgPerM    CPUTime   `json:"prog_cpu_s_per_mpkt"`
	GenPerM     CPUTime   `json:"gen_cpu_s_per_mpkt"`
	CPUsPerM    []CPUTime `json:"cpus_cpu_s_per_mpkt"`
	MaxMallocs  uint64    `json:"max_mallocs"`
}

func summarize(runs []XDPRun) RunSummary {
	var s RunSummary
	if len(runs) == 0 {
		return s
	}
	col := func(f func(r XDPRun) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	cpu := func(f func(r XDPRun) CPUTime) CPUTime {
		return CPUTime{col(func(r XDPRun) float64 { return f(r).User }), col(func(r XDPRun) float64 { return f(r).Sys }),
			col(func(r XDPRun) float64 { return f(r).Softirq }), col(func(r XDPRun) float64 { return f(r).Exec })}
	}
	s.Mpps = col(func(r XDPRun) float64 { return r.Mpps })
	s.Loss = col(func(r XDPRun) float64 { return r.Loss })
	s.OfferedMpps = col(func(r XDPRun) float64 { return r.OfferedMpps })
	s.ProgPerM = cpu(func(r XDPRun) CPUTime { return r.ProgPerM })
	s.GenPerM = cpu(func(r XDPRun) CPUTime { return r.GenPerM })
	n := len(runs[0].CPUsPerM)
	for i := 0; i < n; i++ {
		s.CPUsPerM = append(s.CPUsPerM, cpu(func(r XDPRun) CPUTime {
			if i < len(r.CPUsPerM) {
				return r.CPUsPerM[i]
			}
			return CPUTime{}
		}))
	}
	for _, r := range runs {
		s.MaxMallocs = max(s.MaxMallocs, r.Mallocs)
	}
	return s
}

// impl is one of the two programs compared.
type impl struct {
	name string // "c" or "xdpkit"
	bin  string
}

// proc is one benchmark process running in a namespace.
type proc struct {
	desc   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr bytes.Buffer
	ready  chan struct{}
	done   chan struct{}
	err    error
}

const procTimeout = 90 * time.Second

// onlyImpl is -impl: measure only this implementation ("c", "xdpkit" or
// "xsksample"), e.g. to profile it alone; "" for all.
var onlyImpl string

// xdpkitArgs are xdpkitbench's arguments as the measured receiver or
// forwarder (rxdrop, fwd, l3fwd) beyond the C program's (the report and
// history.jsonl say so): none, the Poller's defaults. -goargs
// --runtime-sleep measures the Poller sleeping in the Go runtime's poller
// also while packets flow (rxpath.Config.RuntimeSleep).
var xdpkitArgs []string

// goArgs is -goargs: extra arguments for xdpkitbench as the measured
// receiver or forwarder (rxdrop, fwd, hairpin, l3fwd), e.g. --max-delay=100us.
var goArgs []string

// niceness is -nice: the scheduling priority of the benchmark programs
// (both implementations alike), 0 to leave it.
var niceness int

// start runs bin in ns (ip netns exec), on cpu when cpu >= 0 (taskset, so
// every thread of the program inherits the affinity from its start).
func start(ctx context.Context, ns *vethns.NS, cpu int, bin string, args ...string) (*proc, error) {
	return startFor(ctx, procTimeout, ns, cpu, bin, args...)
}

// startFor is start with another time limit.
func startFor(ctx context.Context, timeout time.Duration, ns *vethns.NS, cpu int, bin string, args ...string) (*proc, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	argv := append([]string{"netns", "exec", ns.Name, bin}, args...)
	if niceness != 0 {
		argv = append([]string{"netns", "exec", ns.Name, "nice", "-n", strconv.Itoa(niceness), bin}, args...)
	}
	name := "ip"
	if cpu >= 0 {
		argv = append([]string{"-c", strconv.Itoa(cpu), "ip"}, argv...)
		name = "taskset"
	}
	p := &proc{desc: filepath.Base(bin) + " " + strings.Join(args, " "), cancel: cancel,
		ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, name, argv...)
	p.cmd.Stdout = &p.stdout
	// On cancellation ask for a result first; kill after a grace period.
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(os.Interrupt) }
	p.cmd.WaitDelay = 3 * time.Second
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("%s: %w", p.desc, err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		isReady := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if !isReady && strings.Contains(line, ": ready") {
				isReady = true
				close(p.ready)
			}
		}
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *proc) waitReady() error {
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return fmt.Errorf("%s exited before it was ready: %v\n%s", p.desc, p.err, p.stderrText())
	case <-time.After(15 * time.Second):
		p.kill()
		return fmt.Errorf("%s: not ready after 15 s\n%s", p.desc, p.stderrText())
	}
}

func (p *proc) interrupt() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(os.Interrupt)
	}
}

func (p *proc) kill() {
	p.cancel()
	<-p.done
}

// result waits for the process to exit and returns its JSON line.
func (p *proc) result() (map[string]any, json.RawMessage, error) {
	<-p.done
	if p.err != nil {
		return nil, nil, fmt.Errorf("%s: %v\n%s", p.desc, p.err, p.stderrText())
	}
	line := bytes.TrimSpace(p.stdout.Bytes())
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, nil, fmt.Errorf("%s: output is not one JSON line: %w\n%s", p.desc, err, line)
	}
	return m, json.RawMessage(line), nil
}

func num(m map[string]any, k string) float64 {
	f, _ := m[k].(float64)
	return f
}

// cleanups runs closers in reverse order.
type cleanups []func() error

func (c *cleanups) add(f func() error) { *c = append(*c, f) }

func (c *cleanups) run() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		errs = append(errs, (*c)[i]())
	}
	*c = nil
	return errors.Join(errs...)
}

func build(ctx context.Context, c *config, dir string) (cb, gob string, err error) {
	cb, gob = filepath.Join(dir, "xdpbench"), filepath.Join(dir, "xdpkitbench")
	if err := buildC(ctx, c, "xdpbench", cb); err != nil {
		return "", "", err
	}
	if err := buildGo(ctx, c, "./bench/xdpkitbench", gob); err != nil {
		return "", "", err
	}
	return cb, gob, nil
}

// bed is the topology of one mode.
type bed struct {
	p1, p2 *vethns.Pair // p2 only for fwd and l3fwd
	// count is the harness's counter: on the TX peer (txonly), on the
	// return link in the generator's namespace (fwd), on the sink's
	// link (l3fwd) or on the generator's own link (hairpin).
	count *counter
	// back counts on the generator's own link (fwd with xsksample, and
	// hairpin, where it is count): xsksample's l2fwd sends back on the
	// link it receives on.
	back *counter
}

func newNS(cl *cleanups) (*vethns.NS, error) {
	ns, err := vethns.CreateNS()
	if err != nil {
		return nil, err
	}
	cl.add(ns.Close)
	return ns, nil
}

func newPair(cl *cleanups, a, b *vethns.NS) (*vethns.Pair, error) {
	p, err := vethns.CreatePair(a, b, nil)
	if err != nil {
		return nil, err
	}
	cl.add(p.Close)
	return p, nil
}

func genArgs(from, to *vethns.Link, dst netip.Addr, size, secs int) []string {
	return []string{"-m", "txonly", "-i", from.Name, "-q", "0", "-s", strconv.Itoa(size), "-b", "64",
		"--dst-mac", to.MAC.String(), "--src-ip", from.IPv4.Addr().String(), "--dst-ip", dst.String(),
		"-d", strconv.Itoa(secs)}
}

// xdpCase is one row to measure.
type xdpCase struct {
	mode     string
	size     int
	rate     int
	strategy string
	napi     bool // the receiver's NAPIs defer (napiDefer, napiFlush)
}

// The NAPI deferral of the "with NAPI deferral" rows, set on the
// receiving veth for both implementations alike (netdev napi-set).
const (
	napiDefer = 2
	napiFlush = 200 * time.Microsecond
)

// xdpCases are the rows of make bench, by mode: the maximum rate at 64 and
// 1500 B, and for rxdrop and fwd 64 B frames at fixed offered rates.
func xdpCases(mode string, quick bool) []xdpCase {
	var cs []xdpCase
	switch mode {
	case "txonly":
		for _, st := range []string{"sender", "ring"} {
			for _, size := range []int{64, 1500} {
				cs = append(cs, xdpCase{mode: mode, size: size, strategy: st})
			}
		}
	case "l3fwd", "hairpin":
		cs = append(cs, xdpCase{mode: mode, size: 64}, xdpCase{mode: mode, size: 1500})
	default:
		cs = append(cs, xdpCase{mode: mode, size: 64}, xdpCase{mode: mode, size: 1500})
		for _, r := range []int{100_000, 300_000, 1_000_000} {
			cs = append(cs, xdpCase{mode: mode, size: 64, rate: r})
		}
		if mode == "rxdrop" {
			// The kernel's NAPI deferral hands the receiver batches:
			// CPU per packet at the same offered rates with it on.
			for _, r := range []int{100_000, 300_000} {
				cs = append(cs, xdpCase{mode: mode, size: 64, rate: r, napi: true})
			}
		}
	}
	if quick {
		// One of each kind keeps everything from rotting.
		return []xdpCase{cs[0], cs[len(cs)-1]}
	}
	return cs
}

func runXDP(ctx context.Context, c *config, dir string) ([]XDPCase, error) {
	vethns.Sweep()
	cbin, gobin, err := build(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	impls := []impl{{"c", cbin}, {"xdpkit", gobin}}
	sbin := ""
	if onlyImpl == "" || onlyImpl == "xsksample" {
		sbin = filepath.Join(dir, "xsksample")
		if err := buildC(ctx, c, "xsksample", sbin); err != nil {
			return nil, fmt.Errorf("%w (xsksample needs libxdp-dev and libbpf-dev)", err)
		}
	}
	if onlyImpl != "" {
		impls = slices.DeleteFunc(impls, func(im impl) bool { return im.name != onlyImpl })
		if len(impls) == 0 && onlyImpl != "xsksample" {
			return nil, fmt.Errorf("-impl %q: want c, xdpkit or xsksample", onlyImpl)
		}
	}
	gen, meas := -1, -1
	if c.pin {
		gen, meas = c.genCPU, c.measCPU
	}
	var out []XDPCase
	for _, mode := range strings.Split(c.modes, ",") {
		if _, ok := countedAt[mode]; !ok {
			return nil, fmt.Errorf("-modes: unknown mode %q", mode)
		}
		cases, err := runMode(ctx, c, mode, impls, cbin, sbin, gen, meas)
		out = append(out, cases...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// defaultModes are the AF_XDP modes of make bench, in order.
const defaultModes = "txonly,rxdrop,fwd,hairpin,l3fwd"

var countedAt = map[string]string{
	"txonly": "sink: the harness's XDP counter on the peer",
	"rxdrop": "receiver (checked against the generator's completions and XDP_STATISTICS)",
	"fwd":    "return link: the harness's XDP counter in the generator's namespace",
	// The hairpin's forwarder sends back on the link it receives on.
	"hairpin": "generator's link: the harness's XDP counter on the link the generator sends from, which the forwarder's frames come back on",
	"l3fwd":   "sink: the harness's XDP counter on the link of a third namespace, behind the forwarder's second port",
}

// runMode sets up mode's topology once and measures its cases on it, and
// xsksample (sbin, "" for none) beside them where it has a counterpart.
func runMode(ctx context.Context, c *config, mode string, impls []impl, cbin, sbin string, gen, meas int) (_ []XDPCase, err error) {
	var cl cleanups
	defer func() {
		if cerr := cl.run(); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
	}()
	var b bed
	switch mode {
	case "txonly", "rxdrop", "hairpin":
		// hairpin: generator (a) -> forwarder (bns) -> back on the same
		// pair, counted on the generator's end.
		a, err := newNS(&cl)
		if err != nil {
			return nil, err
		}
		bns, err := newNS(&cl)
		if err != nil {
			return nil, err
		}
		if b.p1, err = newPair(&cl, a, bns); err != nil {
			return nil, err
		}
	case "fwd":
		// Generator (namespace 0) -> forwarder (1) -> back to namespace
		// 0 on a second pair, where the harness counts what returns.
		var ns [2]*vethns.NS
		for i := range ns {
			if ns[i], err = newNS(&cl); err != nil {
				return nil, err
			}
		}
		if b.p1, err = newPair(&cl, ns[0], ns[1]); err != nil {
			return nil, err
		}
		if b.p2, err = newPair(&cl, ns[1], ns[0]); err != nil {
			return nil, err
		}
	case "l3fwd":
		// Generator (namespace 0) -> port A of the forwarder (1), routed
		// out of its port B -> the sink (2), where the harness counts.
		var ns [3]*vethns.NS
		for i := range ns {
			if ns[i], err = newNS(&cl); err != nil {
				return nil, err
			}
		}
		if b.p1, err = newPair(&cl, ns[0], ns[1]); err != nil {
			return nil, err
		}
		if b.p2, err = newPair(&cl, ns[1], ns[2]); err != nil {
			return nil, err
		}
	}
	if mode != "rxdrop" {
		at := b.p1.B
		if b.p2 != nil {
			at = b.p2.B
		}
		if mode == "hairpin" {
			at = b.p1.A
		}
		if b.count, err = newCounter(at.NS, at.Name); err != nil {
			return nil, err
		}
		cl.add(b.count.Close)
	}
	if mode == "hairpin" {
		b.back = b.count
	}
	if mode == "fwd" && sbin != "" {
		if b.back, err = newCounter(b.p1.A.NS, b.p1.A.Name); err != nil {
			return nil, err
		}
		cl.add(b.back.Close)
	}
	var cases []XDPCase
	warm := map[int]bool{}
	for _, xc := range xdpCases(mode, c.quick) {
		if c.match != nil && !c.match.MatchString(caseName(xc)) {
			continue
		}
		res := XDPCase{Mode: mode, Size: xc.size, Rate: xc.rate, Strategy: xc.strategy, NAPIDeferral: xc.napi, Counted: countedAt[mode]}
		sx, withSample := sampleOf(xc)
		withSample = withSample && sbin != ""
		if withSample {
			res.Sample = &SampleRuns{Mode: sx.mode, Counted: sampleCountedAt[sx.mode]}
			res.Sample.Args, _ = sampleArgs(sx.mode, "IFNAME", sx.size, c.seconds, sx.rate > 0)
		}
		if !c.quick && !warm[xc.size] {
			// Warm-up: one short run of each per frame size, not counted.
			warm[xc.size] = true
			for _, im := range impls {
				if _, err := once(ctx, &b, xc, im, cbin, 1, gen, meas); err != nil {
					return cases, fmt.Errorf("%s %d B warm-up (%s): %w", mode, xc.size, im.name, err)
				}
			}
			if withSample {
				if _, err := sampleRun(ctx, &b, sx, sbin, cbin, 1, gen, meas); err != nil {
					return cases, fmt.Errorf("%s %d B warm-up (xsksample): %w", mode, xc.size, err)
				}
			}
		}
		for r := 0; r < c.runs; r++ {
			order := impls
			if r%2 == 1 && len(impls) == 2 {
				order = []impl{impls[1], impls[0]}
			}
			// xsksample runs after the others in even rounds, before
			// them in odd ones.
			if withSample && r%2 == 1 {
				if err := sampleMeasure(ctx, &b, sx, sbin, cbin, c.seconds, gen, meas, r, res.Sample); err != nil {
					return cases, err
				}
			}
			for _, im := range order {
				if err := ctx.Err(); err != nil {
					return cases, err
				}
				run, err := once(ctx, &b, xc, im, cbin, c.seconds, gen, meas)
				if err != nil {
					return cases, fmt.Errorf("%s run %d (%s): %w", caseName(xc), r, im.name, err)
				}
				if im.name == "c" {
					res.C = append(res.C, run)
				} else {
					res.Go = append(res.Go, run)
				}
				logf("  %-28s %-6s run %d: %.3f Mpps counted (own %d, sent %d, loss %.2f%%), prog %.3f CPU-s/Mpkt (usr+sys in ticks %.3f)",
					caseName(xc), im.name, r, run.Mpps, run.Own, run.Sent, 100*run.Loss, run.ProgPerM.Total(), run.ProgPerM.User+run.ProgPerM.Sys)
			}
			if withSample && r%2 == 0 {
				if err := sampleMeasure(ctx, &b, sx, sbin, cbin, c.seconds, gen, meas, r, res.Sample); err != nil {
					return cases, err
				}
			}
		}
		if withSample {
			res.Sample.Sum = summarize(res.Sample.Runs)
		}
		res.CSum, res.GoSum = summarize(res.C), summarize(res.Go)
		res.CMedian, res.GoMedian = res.CSum.Mpps, res.GoSum.Mpps
		if res.CMedian > 0 {
			res.Ratio = res.GoMedian / res.CMedian
		}
		logf("%s: C %.3f, xdpkit %.3f Mpps (median of %d), ratio %.2f", caseName(xc), res.CMedian, res.GoMedian, c.runs, res.Ratio)
		cases = append(cases, res)
	}
	return cases, nil
}

func caseName(xc xdpCase) string {
	s := fmt.Sprintf("%s %d B", xc.mode, xc.size)
	if xc.rate > 0 {
		s += fmt.Sprintf(" at %s", rateName(xc.rate))
	}
	if xc.strategy != "" {
		s += " (" + xc.strategy + ")"
	}
	if xc.napi {
		s += " with NAPI deferral"
	}
	return s
}

func rateName(pps int) string {
	if pps >= 1_000_000 && pps%1_000_000 == 0 {
		return fmt.Sprintf("%d Mpps", pps/1_000_000)
	}
	return fmt.Sprintf("%d kpps", pps/1000)
}

// usage is what a finished process used: user and system time of all its
// threads (rusage), and their sum as Exec (the kernel scales the
// tick-sampled split so that it adds up to sum_exec_runtime).
func (p *proc) usage() CPUTime {
	if p.cmd.ProcessState == nil {
		return CPUTime{}
	}
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return CPUTime{}
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	u, s := tv(ru.Utime), tv(ru.Stime)
	return CPUTime{User: u, Sys: s, Exec: u + s}
}

// once runs one measurement of im in case xc. The harness reads the CPU
// counters (/proc/stat, the programs' CPU clocks and /proc/PID/stat, or
// the rusage of a program that has exited) around the traffic,
// and counts the frames at xc's independent point.
func once(ctx context.Context, b *bed, xc xdpCase, im impl, cbin string, secs, gen, meas int) (XDPRun, error) {
	var run XDPRun
	switch xc.mode {
	case "txonly":
		args := genArgs(b.p1.A, b.p1.B, b.p1.B.IPv4.Addr(), xc.size, secs)
		switch {
		case im.name == "c" && xc.strategy == "sender":
			args = append(args, "--drain")
		case im.name == "xdpkit" && xc.strategy == "ring":
			args = append(args, "--tx", "ring")
		}
		n0, err := b.count.total()
		if err != nil {
			return run, err
		}
		p, err := start(ctx, b.p1.A.NS, meas, im.bin, args...)
		if err != nil {
			return run, err
		}
		if err := p.waitReady(); err != nil {
			return run, err
		}
		c0, err1 := cpuStat()
		p0, err2 := procCPU(p.cmd.Process.Pid)
		if err := errors.Join(err1, err2); err != nil {
			p.kill()
			return run, err
		}
		m, raw, err := p.result()
		if err != nil {
			return run, err
		}
		time.Sleep(50 * time.Millisecond) // frames in the peer's queue
		c1, err := cpuStat()
		if err != nil {
			return run, err
		}
		n1, err := b.count.total()
		if err != nil {
			return run, err
		}
		run.Raw, run.Frames, run.Sent, run.Own = raw, n1-n0, uint64(num(m, "frames")), uint64(num(m, "frames"))
		run.Seconds, run.Mallocs = num(m, "seconds"), uint64(num(m, "mallocs"))
		run.Prog, run.CPUs = p.usage().sub(p0), cpuDelta(c0, c1)
	case "rxdrop", "fwd", "l3fwd", "hairpin":
		var args []string
		var rxNS *vethns.NS
		dst := b.p1.B.IPv4.Addr()
		switch xc.mode {
		case "rxdrop":
			rxNS, args = b.p1.B.NS, []string{"-m", "rxdrop", "-i", b.p1.B.Name, "-q", "0", "-d", strconv.Itoa(secs + 10)}
		case "hairpin":
			// fwd with -o equal to -i: one socket, back to the generator.
			rxNS, args = b.p1.B.NS, []string{"-m", "fwd", "-i", b.p1.B.Name, "-o", b.p1.B.Name,
				"--dst-mac", b.p1.A.MAC.String(), "-d", strconv.Itoa(secs + 10)}
		default:
			rxNS, args = b.p1.B.NS, []string{"-m", "fwd", "-i", b.p1.B.Name, "-o", b.p2.A.Name,
				"--dst-mac", b.p2.B.MAC.String(), "-d", strconv.Itoa(secs + 10)}
			if xc.mode == "l3fwd" {
				// Routed to the sink's address; --dst-mac is the next hop.
				args = append(args, "--l3")
			}
			dst = b.p2.B.IPv4.Addr()
		}
		if im.name == "xdpkit" {
			args = append(args, xdpkitArgs...)
			args = append(args, goArgs...)
		}
		rx, err := start(ctx, rxNS, meas, im.bin, args...)
		if err != nil {
			return run, err
		}
		if err := rx.waitReady(); err != nil {
			return run, err
		}
		if xc.napi {
			restore, err := deferNAPI(rxNS, b.p1.B.Name)
			if err != nil {
				rx.kill()
				return run, err
			}
			defer restore()
		}
		var n0 uint64
		if b.count != nil {
			if n0, err = b.count.total(); err != nil {
				rx.kill()
				return run, err
			}
		}
		gargs := genArgs(b.p1.A, b.p1.B, dst, xc.size, secs)
		if xc.rate > 0 {
			gargs = append(gargs, "--rate", strconv.Itoa(xc.rate))
		}
		c0, err1 := cpuStat()
		p0, err2 := procCPU(rx.cmd.Process.Pid)
		t0, err5 := procThreads(rx.cmd.Process.Pid)
		g, err3 := start(ctx, b.p1.A.NS, gen, cbin, gargs...)
		if err := errors.Join(err1, err2, err3, err5); err != nil {
			rx.kill()
			return run, err
		}
		if err := g.waitReady(); err != nil {
			rx.kill()
			return run, fmt.Errorf("generator: %w", err)
		}
		g0, gerr := procCPU(g.cmd.Process.Pid)
		gm, graw, err := g.result()
		if err := errors.Join(gerr, err); err != nil {
			rx.kill()
			return run, fmt.Errorf("generator: %w", err)
		}
		time.Sleep(200 * time.Millisecond) // frames in flight
		c1, err1 := cpuStat()
		p1, err2 := procCPU(rx.cmd.Process.Pid)
		t1, err5 := procThreads(rx.cmd.Process.Pid)
		err2 = errors.Join(err2, err5)
		var n1 uint64
		var err4 error
		if b.count != nil {
			n1, err4 = b.count.total()
		}
		if err := errors.Join(err1, err2, err4); err != nil {
			rx.kill()
			return run, err
		}
		rx.interrupt()
		m, raw, err := rx.result()
		if err != nil {
			return run, err
		}
		run.Raw, run.GenRaw = raw, graw
		run.Sent, run.Seconds = uint64(num(gm, "frames")), num(gm, "seconds")
		run.OfferedMpps = num(gm, "mpps")
		run.Own = uint64(num(m, "frames"))
		run.XSKDrops = uint64(num(m, "rx_dropped") + num(m, "rx_ring_full"))
		run.Mallocs = uint64(num(m, "mallocs"))
		if n := num(m, "not_routed"); n > 0 {
			logf("  warning: the forwarder did not route %.0f frames (malformed, not IP or TTL expiring)", n)
		}
		if xc.mode == "rxdrop" {
			run.Frames = run.Own
			run.Unaccounted = int64(run.Sent) - int64(run.Frames) - int64(run.XSKDrops)
			if run.Own > run.Sent {
				logf("  warning: the receiver counted %d frames, the generator completed %d", run.Own, run.Sent)
			}
		} else {
			run.Frames = n1 - n0
		}
		run.Prog, run.Gen, run.CPUs = p1.sub(p0), g.usage().sub(g0), cpuDelta(c0, c1)
		split := splitThreads(t0, t1)
		run.Threads, run.Wakeups, run.Naps = &split, uint64(num(m, "wakeups")), uint64(num(m, "naps"))
	default:
		return run, fmt.Errorf("unknown mode %q", xc.mode)
	}
	if run.Seconds > 0 {
		run.Mpps = float64(run.Frames) / run.Seconds / 1e6
	}
	if run.Sent > 0 {
		run.Loss = 1 - float64(run.Frames)/float64(run.Sent)
	}
	run.ProgPerM, run.GenPerM = run.Prog.perM(run.Frames), run.Gen.perM(run.Frames)
	for _, u := range run.CPUs {
		run.CPUsPerM = append(run.CPUsPerM, u.perM(run.Frames))
	}
	return run, nil
}

// deferNAPI sets the NAPI deferral of the interface ifname in ns
// (xsk.SetNAPIDeferral; veth's NAPIs exist while an XDP program is
// attached: after the receiver is ready) and returns what puts the old
// settings back.
func deferNAPI(ns *vethns.NS, ifname string) (restore func(), err error) {
	var c *xsk.NAPIChange
	err = ns.Do(func() (err error) {
		c, err = xsk.SetNAPIDeferral(ifname, xsk.NAPIDeferral{DeferHardIRQs: napiDefer, GROFlushTimeout: napiFlush})
		return err
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = ns.Do(c.Restore) }, nil
}
