package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// SampleCase is one row of the sample program: xsksample
// (bench/c/xsksample.c, the shape of the kernel's and bpf-examples' AF_XDP
// sample, xdpsock, on libxdp) in one of its modes, with every measured
// run, counted at the same independent point as the AF_XDP rows of the
// same mode.
type SampleCase struct {
	// Mode is the sample's: rxdrop (-r), txonly (-t) or l2fwd (-l).
	Mode string `json:"mode"`
	Size int    `json:"size"`
	// Rate is the generator's paced rate (rxdrop, l2fwd), 0 for the
	// maximum-rate rows.
	Rate    int        `json:"rate_pps"`
	Args    []string   `json:"args"`
	Counted string     `json:"counted_at"`
	Runs    []XDPRun   `json:"runs"`
	Sum     RunSummary `json:"summary"`
}

// sampleCountedAt says where each mode's frames are counted: the points
// of the AF_XDP rows (countedAt) of the same mode.
var sampleCountedAt = map[string]string{
	"txonly": "sink: the harness's XDP counter on the peer",
	"rxdrop": "receiver: the sample's own rx count (checked against the generator's completions)",
	"l2fwd":  "return link: the harness's XDP counter on the generator's link (hairpin: the sample sends back on the link it receives on)",
}

// sampleModes maps the AF_XDP modes of -modes to the sample's.
var sampleModes = map[string]string{"txonly": "txonly", "rxdrop": "rxdrop", "fwd": "l2fwd"}

// sampleCases are the sample's rows for the AF_XDP modes in modes (fwd
// gives l2fwd): each at 64 and 1500 B, and rxdrop and l2fwd at the AF_XDP
// rows' fixed rates. quick keeps the first row of each mode.
func sampleCases(modes []string, quick bool) []xdpCase {
	var cs []xdpCase
	for _, m := range modes {
		mode, ok := sampleModes[m]
		if !ok {
			continue
		}
		cs = append(cs, xdpCase{mode: mode, size: 64})
		if quick {
			continue
		}
		cs = append(cs, xdpCase{mode: mode, size: 1500})
		if mode != "txonly" {
			for _, r := range []int{100_000, 300_000, 1_000_000} {
				cs = append(cs, xdpCase{mode: mode, size: 64, rate: r})
			}
		}
	}
	return cs
}

// sampleTwin is the AF_XDP row that a sample row sits beside, by name:
// txonly beside the "ring" strategy (which kicks when the kernel asks, as
// the sample does), l2fwd beside fwd.
func sampleTwin(xc xdpCase) xdpCase {
	t := xc
	switch xc.mode {
	case "l2fwd":
		t.mode = "fwd"
	case "txonly":
		t.strategy = "ring"
	}
	return t
}

// fcs is the frame check sequence that the sample's -s counts (as
// xdpsock's does) and the frames in the rings do not carry.
const fcs = 4

// sampleArgs is the sample's command line for mode on ifname: queue 0,
// native XDP (-N, veth has it) in copy mode (-c, veth has no zero-copy),
// batch 64 (its default, as the other rows), busy loop with the
// need-wakeup flag (its default), stats every second, for secs seconds.
// txonly's -s is size + 4: the same frames as the other txonly rows. With
// poll it sleeps in poll(2) (-p) instead: the fixed-rate rows, where CPU
// per packet is the figure and a busy loop spends one CPU whatever the
// rate.
func sampleArgs(mode, ifname string, size, secs int, poll bool) ([]string, error) {
	flag, ok := map[string]string{"rxdrop": "-r", "txonly": "-t", "l2fwd": "-l"}[mode]
	if !ok {
		return nil, fmt.Errorf("xsksample: unknown mode %q (rxdrop, txonly, l2fwd)", mode)
	}
	args := []string{flag, "-i", ifname, "-q", "0", "-N", "-c", "-b", "64", "-n", "1", "-d", strconv.Itoa(secs)}
	if mode == "txonly" {
		args = append(args, "-s", strconv.Itoa(size+fcs))
	}
	if poll {
		args = append(args, "-p")
	}
	return args, nil
}

// sampleStats is what the sample's last statistics block says: its socket's
// cumulative rx and tx packets.
type sampleStats struct {
	RX, TX uint64
	Blocks int // statistics blocks seen
}

// parseLine takes one line of the sample's output: a block starts with
// " sock0@", then "rx  <pps> <pkts>" and "tx  <pps> <pkts>" (digits may
// be grouped by the locale).
func (s *sampleStats) parseLine(line string) error {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	if strings.HasPrefix(f[0], "sock0@") {
		s.Blocks++
		return nil
	}
	if (f[0] != "rx" && f[0] != "tx") || len(f) < 3 {
		return nil
	}
	n, err := strconv.ParseUint(strings.NewReplacer(",", "", ".", "", "'", "").Replace(f[2]), 10, 64)
	if err != nil {
		return fmt.Errorf("xsksample: %s packets %q: %w", f[0], f[2], err)
	}
	if f[0] == "rx" {
		s.RX = n
	} else {
		s.TX = n
	}
	return nil
}

// sockProc is the sample running in a namespace: ready once it printed its
// first statistics (its socket and XDP program are set up before, and
// the first comes an interval later).
type sockProc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	ready  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	stats  sampleStats
	out    strings.Builder
	perr   error
	err    error
}

func startSample(ctx context.Context, ns *vethns.NS, cpu int, bin string, args ...string) (*sockProc, error) {
	ctx, cancel := context.WithTimeout(ctx, procTimeout)
	// The sample flushes each statistics block: the first marks it ready.
	argv := append([]string{"netns", "exec", ns.Name, bin}, args...)
	name := "ip"
	if cpu >= 0 {
		argv = append([]string{"-c", strconv.Itoa(cpu), "ip"}, argv...)
		name = "taskset"
	}
	p := &sockProc{cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, name, argv...)
	p.cmd.Env = append(os.Environ(), "LC_ALL=C")
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(os.Interrupt) }
	p.cmd.WaitDelay = 3 * time.Second
	p.cmd.Stderr = &lockedWriter{p: p}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("xsksample: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			if err := p.stats.parseLine(sc.Text()); err != nil && p.perr == nil {
				p.perr = err
			}
			first := p.stats.Blocks == 1 && strings.Contains(sc.Text(), "sock0@")
			p.mu.Unlock()
			if first {
				close(p.ready)
			}
		}
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	return p, nil
}

type lockedWriter struct{ p *sockProc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

func (p *sockProc) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *sockProc) waitReady() error {
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return fmt.Errorf("xsksample exited before it was ready: %v\n%s", p.err, p.text())
	case <-time.After(15 * time.Second):
		p.kill()
		return fmt.Errorf("xsksample: no statistics after 15 s\n%s", p.text())
	}
}

func (p *sockProc) kill() {
	p.cancel()
	<-p.done
}

// result waits for the sample to exit and returns its last statistics.
func (p *sockProc) result() (sampleStats, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.stats, fmt.Errorf("xsksample: %v\n%s", p.err, p.out.String())
	}
	return p.stats, p.perr
}

func (p *sockProc) usage() CPUTime {
	return (&proc{cmd: p.cmd}).usage()
}

// runSample builds xsksample and measures its rows for the AF_XDP modes
// of -modes, each row on its own pair of namespaces, with xdpbench (the C
// reference) as the generator of rxdrop and l2fwd as in the AF_XDP rows.
// -match selects a row by its name ("xsksample l2fwd 64 B") or by the
// AF_XDP row it sits beside ("fwd 64 B").
func runSample(ctx context.Context, c *config, dir string) ([]SampleCase, error) {
	vethns.Sweep()
	sbin, cbin := filepath.Join(dir, "xsksample"), filepath.Join(dir, "xdpbench")
	if err := buildC(ctx, c, "xsksample", sbin); err != nil {
		return nil, fmt.Errorf("%w (xsksample needs libxdp-dev and libbpf-dev)", err)
	}
	if err := buildC(ctx, c, "xdpbench", cbin); err != nil {
		return nil, err
	}
	gen, meas := -1, -1
	if c.pin {
		gen, meas = c.genCPU, c.measCPU
	}
	var out []SampleCase
	for _, xc := range sampleCases(strings.Split(c.modes, ","), c.quick) {
		if c.match != nil && !c.match.MatchString("xsksample "+caseName(xc)) && !c.match.MatchString(caseName(sampleTwin(xc))) {
			continue
		}
		res, err := runSampleCase(ctx, c, xc, sbin, cbin, gen, meas)
		if len(res.Runs) > 0 {
			out = append(out, res)
		}
		if err != nil {
			return out, fmt.Errorf("xsksample %s: %w", caseName(xc), err)
		}
	}
	return out, nil
}

// runSampleCase sets up a pair of namespaces for one row and measures it
// c.runs times after one uncounted warm-up run.
func runSampleCase(ctx context.Context, c *config, xc xdpCase, sbin, cbin string, gen, meas int) (res SampleCase, err error) {
	res = SampleCase{Mode: xc.mode, Size: xc.size, Rate: xc.rate, Counted: sampleCountedAt[xc.mode]}
	var cl cleanups
	defer func() {
		if cerr := cl.run(); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
	}()
	a, err := newNS(&cl)
	if err != nil {
		return res, err
	}
	bns, err := newNS(&cl)
	if err != nil {
		return res, err
	}
	p, err := newPair(&cl, a, bns)
	if err != nil {
		return res, err
	}
	var count *counter
	if xc.mode != "rxdrop" {
		// The sample runs on B; what it sends (txonly) or sends back
		// (l2fwd) arrives on A, where the harness counts.
		if count, err = newCounter(p.A.NS, p.A.Name); err != nil {
			return res, err
		}
		cl.add(count.Close)
	}
	res.Args, _ = sampleArgs(xc.mode, p.B.Name, xc.size, c.seconds, xc.rate > 0)
	for r := -1; r < c.runs; r++ {
		secs := c.seconds
		if r < 0 {
			if c.quick {
				continue
			}
			secs = 1
		}
		run, err := sampleOnce(ctx, p, count, xc, sbin, cbin, secs, gen, meas)
		for try := 1; err != nil && ctx.Err() == nil && strings.Contains(err.Error(), "resource busy") && try < 5; try++ {
			// The kernel releases a closed socket's hold on the queue
			// a little later (deferred work): the next one's bind may
			// find it busy for a moment.
			logf("  xsksample %s: queue busy, trying again", caseName(xc))
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
			run, err = sampleOnce(ctx, p, count, xc, sbin, cbin, secs, gen, meas)
		}
		if err != nil {
			return res, fmt.Errorf("run %d: %w", r, err)
		}
		if r < 0 {
			continue
		}
		res.Runs = append(res.Runs, run)
		logf("  xsksample %-26s run %d: %.3f Mpps counted (own %d, sent %d, loss %.2f%%), prog %.3f CPU-s/Mpkt",
			caseName(xc), r, run.Mpps, run.Own, run.Sent, 100*run.Loss, run.ProgPerM.Total())
	}
	res.Sum = summarize(res.Runs)
	logf("xsksample %s: %.3f Mpps (median of %d)", caseName(xc), res.Sum.Mpps, len(res.Runs))
	return res, nil
}

// sampleOnce is one measured run of the sample in xc's mode.
func sampleOnce(ctx context.Context, p *vethns.Pair, count *counter, xc xdpCase, sbin, cbin string, secs, gen, meas int) (XDPRun, error) {
	var run XDPRun
	dur := secs
	if xc.mode != "txonly" {
		dur = secs + 10 // stopped by the harness once the generator ends
	}
	args, err := sampleArgs(xc.mode, p.B.Name, xc.size, dur, xc.rate > 0)
	if err != nil {
		return run, err
	}
	var n0 uint64
	if count != nil {
		if n0, err = count.total(); err != nil {
			return run, err
		}
	}
	c0, err := cpuStat()
	if err != nil {
		return run, err
	}
	sp, err := startSample(ctx, p.B.NS, meas, sbin, args...)
	if err != nil {
		return run, err
	}
	if xc.mode == "txonly" {
		// Its whole life: it sends from its start for secs seconds,
		// so its CPU is its rusage, setup included.
		st, err := sp.result()
		if err != nil {
			return run, err
		}
		time.Sleep(50 * time.Millisecond) // frames in the peer's queue
		c1, err := cpuStat()
		if err != nil {
			return run, err
		}
		n1, err := count.total()
		if err != nil {
			return run, err
		}
		run.Frames, run.Own, run.Sent, run.Seconds = n1-n0, st.TX, st.TX, float64(secs)
		run.Prog, run.CPUs = sp.usage(), cpuDelta(c0, c1)
	} else {
		if err := sp.waitReady(); err != nil {
			return run, err
		}
		c0, err1 := cpuStat()
		p0, err2 := procCPU(sp.cmd.Process.Pid)
		if err := errors.Join(err1, err2); err != nil {
			sp.kill()
			return run, err
		}
		if count != nil {
			if n0, err = count.total(); err != nil {
				sp.kill()
				return run, err
			}
		}
		gargs := genArgs(p.A, p.B, p.B.IPv4.Addr(), xc.size, secs)
		if xc.rate > 0 {
			gargs = append(gargs, "--rate", strconv.Itoa(xc.rate))
		}
		g, err := start(ctx, p.A.NS, gen, cbin, gargs...)
		if err != nil {
			sp.kill()
			return run, err
		}
		if err := g.waitReady(); err != nil {
			sp.kill()
			return run, fmt.Errorf("generator: %w", err)
		}
		g0, gerr := procCPU(g.cmd.Process.Pid)
		gm, graw, err := g.result()
		if err := errors.Join(gerr, err); err != nil {
			sp.kill()
			return run, fmt.Errorf("generator: %w", err)
		}
		// Frames in flight, and the sample's next statistics (every second)
		// so that its own count covers the whole run.
		time.Sleep(1200 * time.Millisecond)
		c1, err1 := cpuStat()
		p1, err2 := procCPU(sp.cmd.Process.Pid)
		var n1 uint64
		var err3 error
		if count != nil {
			n1, err3 = count.total()
		}
		if err := errors.Join(err1, err2, err3); err != nil {
			sp.kill()
			return run, err
		}
		_ = sp.cmd.Process.Signal(os.Interrupt)
		st, err := sp.result()
		if err != nil {
			return run, err
		}
		run.GenRaw = graw
		run.Sent, run.Seconds, run.OfferedMpps = uint64(num(gm, "frames")), num(gm, "seconds"), num(gm, "mpps")
		if xc.mode == "rxdrop" {
			run.Own, run.Frames = st.RX, st.RX
		} else {
			run.Own, run.Frames = st.TX, n1-n0
		}
		run.Prog, run.Gen, run.CPUs = p1.sub(p0), g.usage().sub(g0), cpuDelta(c0, c1)
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

// writeSample is the sample's section of the summary: each row beside
// the AF_XDP rows of the same mode, size and rate (txonly: the "ring"
// strategy; l2fwd: the fwd rows, whose forwarder sends out of a second
// link where the sample sends back on the one it receives on), each as
// the median (min-max) of its runs.
func writeSample(b *strings.Builder, xs []SampleCase, xdp []XDPCase) {
	if len(xs) == 0 {
		return
	}
	b.WriteString("\n### The AF_XDP sample program shape: xsksample (xdpsock's modes and defaults)\n\n")
	b.WriteString("bench/c/xsksample.c follows xdpsock's loops and defaults on libxdp: native XDP, copy mode, batch 64, Fill ring 4096; a busy loop at the maximum rate, poll(2) at the fixed rates. Mpps counted at the AF_XDP rows' points, median (min-max) of the runs; CPU in CPU-s per million packets of the measured program. l2fwd is a hairpin on one link, beside the fwd rows (two links); txonly beside the ring strategy.\n\n")
	b.WriteString("| case | xsksample | C reference | xdpkit | C/xsksample | xdpkit/xsksample | CPU xsksample | CPU C | CPU xdpkit |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range xs {
		twin := sampleTwin(xdpCase{mode: x.Mode, size: x.Size, rate: x.Rate})
		cref, gref, cratio, gratio, ccpu, gcpu := "-", "-", "-", "-", "-", "-"
		for _, r := range xdp {
			if r.Mode != twin.mode || r.Size != x.Size || r.Rate != x.Rate || r.Strategy != twin.strategy || r.NAPIDeferral {
				continue
			}
			if len(r.C) > 0 {
				lo, hi := mppsRange(r.C)
				cref, ccpu = fmt.Sprintf("%.3f (%.3f-%.3f)", r.CMedian, lo, hi), fmt.Sprintf("%.3f", r.CSum.ProgPerM.Total())
				if x.Sum.Mpps > 0 {
					cratio = fmt.Sprintf("%.2f", r.CMedian/x.Sum.Mpps)
				}
			}
			if len(r.Go) > 0 {
				lo, hi := mppsRange(r.Go)
				gref, gcpu = fmt.Sprintf("%.3f (%.3f-%.3f)", r.GoMedian, lo, hi), fmt.Sprintf("%.3f", r.GoSum.ProgPerM.Total())
				if x.Sum.Mpps > 0 {
					gratio = fmt.Sprintf("%.2f", r.GoMedian/x.Sum.Mpps)
				}
			}
		}
		lo, hi := mppsRange(x.Runs)
		fmt.Fprintf(b, "| %s | %.3f (%.3f-%.3f) | %s | %s | %s | %s | %.3f | %s | %s |\n",
			caseName(xdpCase{mode: x.Mode, size: x.Size, rate: x.Rate}), x.Sum.Mpps, lo, hi, cref, gref, cratio, gratio, x.Sum.ProgPerM.Total(), ccpu, gcpu)
	}
	b.WriteString("\nCounted at: ")
	for i, m := range []string{"txonly", "rxdrop", "l2fwd"} {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(b, "%s, %s", m, sampleCountedAt[m])
	}
	b.WriteString(".\n")
}

func mppsRange(runs []XDPRun) (lo, hi float64) {
	for i, r := range runs {
		if i == 0 || r.Mpps < lo {
			lo = r.Mpps
		}
		hi = max(hi, r.Mpps)
	}
	return lo, hi
}
