package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// SampleRuns are xsksample's runs in one AF_XDP case (bench/c/xsksample.c,
// the shape of the kernel's and bpf-examples' AF_XDP sample, xdpsock, on
// libxdp), in the matching mode, alternated with the C reference's and
// xdpkit's runs on the same links and counted at the same independent
// point.
type SampleRuns struct {
	// Mode is the sample's: rxdrop (-r), txonly (-t) or l2fwd (-l).
	Mode    string     `json:"mode"`
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
	"l2fwd":  "the harness's XDP counter on the generator's link (hairpin: the sample sends back on the link it receives on)",
}

// sampleOf is the sample's counterpart of an AF_XDP case, if it has one:
// txonly beside the "ring" strategy (which keeps the ring full and kicks
// when the kernel asks, as the sample does), rxdrop without NAPI
// deferral, l2fwd (a hairpin) beside the hairpin at the maximum rate and
// beside fwd at the fixed offered rates (CPU per packet, where the
// hairpin has no rows).
func sampleOf(xc xdpCase) (xdpCase, bool) {
	sx := xdpCase{size: xc.size, rate: xc.rate}
	switch {
	case xc.mode == "txonly" && xc.strategy == "ring":
		sx.mode = "txonly"
	case xc.mode == "rxdrop" && !xc.napi:
		sx.mode = "rxdrop"
	case xc.mode == "hairpin" || (xc.mode == "fwd" && xc.rate > 0):
		sx.mode = "l2fwd"
	default:
		return sx, false
	}
	return sx, true
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

// sampleRun is one run of the sample in the bed of an AF_XDP case: the
// txonly sample sends from the TX peer's other end into the bed's
// counter, rxdrop receives from the generator where the C receiver does,
// l2fwd receives where the forwarder does and sends back to the
// generator's link, counted there (b.back). A bind that finds the queue
// still busy from the last run's socket (the kernel releases it a little
// later, in deferred work) is tried again.
func sampleRun(ctx context.Context, b *bed, sx xdpCase, sbin, cbin string, secs, gen, meas int) (XDPRun, error) {
	p, count := b.p1, b.count
	switch sx.mode {
	case "txonly":
		p = &vethns.Pair{A: b.p1.B, B: b.p1.A}
	case "rxdrop":
		count = nil
	case "l2fwd":
		count = b.back
	}
	run, err := sampleOnce(ctx, p, count, sx, sbin, cbin, secs, gen, meas)
	for try := 1; err != nil && ctx.Err() == nil && strings.Contains(err.Error(), "resource busy") && try < 5; try++ {
		logf("  xsksample %s: queue busy, trying again", caseName(sx))
		time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		run, err = sampleOnce(ctx, p, count, sx, sbin, cbin, secs, gen, meas)
	}
	return run, err
}

// sampleMeasure is measured run r of the sample, appended to res.
func sampleMeasure(ctx context.Context, b *bed, sx xdpCase, sbin, cbin string, secs, gen, meas, r int, res *SampleRuns) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	run, err := sampleRun(ctx, b, sx, sbin, cbin, secs, gen, meas)
	if err != nil {
		return fmt.Errorf("xsksample %s run %d: %w", caseName(sx), r, err)
	}
	res.Runs = append(res.Runs, run)
	logf("  %-28s %-6s run %d: %.3f Mpps counted (own %d, sent %d, loss %.2f%%), prog %.3f CPU-s/Mpkt",
		caseName(sx), "xsksample", r, run.Mpps, run.Own, run.Sent, 100*run.Loss, run.ProgPerM.Total())
	return nil
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
		// Frames in flight, as for the other receivers and forwarders:
		// the CPU is read over the same window. The sample's own count
		// comes from the statistics block it prints as it exits.
		time.Sleep(200 * time.Millisecond)
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

// writeSample is the sample's table: each AF_XDP case that has a sample
// counterpart, its median (min-max) beside the C reference's and xdpkit's
// from the same alternated runs.
func writeSample(b *strings.Builder, xdp []XDPCase) {
	var rows []XDPCase
	for _, x := range xdp {
		if x.Sample != nil && len(x.Sample.Runs) > 0 {
			rows = append(rows, x)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n### The AF_XDP sample program shape: xsksample (xdpsock's modes and defaults)\n\n")
	b.WriteString("bench/c/xsksample.c follows xdpsock's loops and defaults on libxdp: native XDP, copy mode, batch 64, Fill ring 4096, all 4096 frames in turn; a busy loop at the maximum rate, poll(2) at the fixed rates. Its runs alternate with the C reference's and xdpkit's on the same links and are counted at the same points; l2fwd is a hairpin (back on the link it receives on, counted on the generator's link) beside the C reference's and xdpkit's hairpin at the maximum rate, and beside fwd (out of a second link) at the fixed rates; txonly beside the ring strategy. Mpps: median (min-max) of the runs; CPU: CPU-s per million packets of the measured program, median.\n\n")
	b.WriteString("| case | xsksample | C reference | xdpkit | C/xsksample | xdpkit/xsksample | CPU xsksample | CPU C | CPU xdpkit |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		x := r.Sample
		sx := xdpCase{mode: x.Mode, size: r.Size, rate: r.Rate}
		cref, gref, cratio, gratio, ccpu, gcpu := "-", "-", "-", "-", "-", "-"
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
		lo, hi := mppsRange(x.Runs)
		fmt.Fprintf(b, "| %s | %.3f (%.3f-%.3f) | %s | %s | %s | %s | %.3f | %s | %s |\n",
			caseName(sx), x.Sum.Mpps, lo, hi, cref, gref, cratio, gratio, x.Sum.ProgPerM.Total(), ccpu, gcpu)
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
