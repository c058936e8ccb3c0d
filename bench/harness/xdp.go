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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// XDPCase is one AF_XDP measurement: a mode and frame size, with the Mpps
// of every measured run of each implementation.
type XDPCase struct {
	Mode     string    `json:"mode"`
	Size     int       `json:"size"`
	C        []float64 `json:"c_mpps"`
	Go       []float64 `json:"xdpkit_mpps"`
	CMedian  float64   `json:"c_median_mpps"`
	GoMedian float64   `json:"xdpkit_median_mpps"`
	Ratio    float64   `json:"ratio"` // xdpkit / C, of the medians
	// GoMallocs are xdpkitbench's heap allocations during each measured
	// loop (whole process).
	GoMallocs []uint64 `json:"xdpkit_mallocs"`
	// Raw are the JSON lines of every measured run, C then xdpkit per run.
	Raw []json.RawMessage `json:"raw,omitempty"`
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

// start runs bin in ns (ip netns exec), on cpu when cpu >= 0 (taskset, so
// every thread of the program inherits the affinity from its start).
func start(ctx context.Context, ns *vethns.NS, cpu int, bin string, args ...string) (*proc, error) {
	return startFor(ctx, procTimeout, ns, cpu, bin, args...)
}

// startFor is start with another time limit.
func startFor(ctx context.Context, timeout time.Duration, ns *vethns.NS, cpu int, bin string, args ...string) (*proc, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	argv := append([]string{"netns", "exec", ns.Name, bin}, args...)
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

// stopAfter lets frames in flight arrive, interrupts p and returns its result.
func (p *proc) stopAfter(d time.Duration) (map[string]any, json.RawMessage, error) {
	time.Sleep(d)
	p.interrupt()
	return p.result()
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
	cb = filepath.Join(dir, "xdpbench")
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(c.repo, "bench/c/build.sh"))
	cmd.Env = append(os.Environ(), "OUT="+cb)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build xdpbench: %w\n%s", err, b)
	}
	gob = filepath.Join(dir, "xdpkitbench")
	cmd = exec.CommandContext(ctx, "go", "build", "-o", gob, "./bench/xdpkitbench")
	cmd.Dir = c.repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build xdpkitbench: %w\n%s", err, b)
	}
	return cb, gob, nil
}

// bed is the topologies of one mode.
type bed struct {
	p1, p2 *vethns.Pair // p2 only for fwd
	sink   *proc
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

func runXDP(ctx context.Context, c *config, dir string) ([]XDPCase, error) {
	vethns.Sweep()
	cbin, gobin, err := build(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	impls := []impl{{"c", cbin}, {"xdpkit", gobin}}
	gen, meas := -1, -1
	if c.pin {
		gen, meas = c.genCPU, c.measCPU
	}
	var out []XDPCase
	for _, mode := range []string{"txonly", "rxdrop", "fwd"} {
		cases, err := runMode(ctx, c, mode, impls, cbin, gen, meas)
		out = append(out, cases...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// runMode sets up mode's topology once and measures both sizes on it.
func runMode(ctx context.Context, c *config, mode string, impls []impl, cbin string, gen, meas int) (_ []XDPCase, err error) {
	var cl cleanups
	defer func() {
		if cerr := cl.run(); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
	}()
	var b bed
	switch mode {
	case "txonly", "rxdrop":
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
	// The XDP_DROP sink stays for the whole mode (txonly: on the peer;
	// fwd: at the far end).
	if mode != "rxdrop" {
		at := b.p1.B
		if mode == "fwd" {
			at = b.p2.B
		}
		b.sink, err = startFor(ctx, 20*time.Minute, at.NS, -1, cbin, "-m", "sink", "-i", at.Name, "-d", "3600")
		if err != nil {
			return nil, err
		}
		sink := b.sink
		cl.add(func() error { sink.kill(); return nil })
		if err := b.sink.waitReady(); err != nil {
			return nil, err
		}
		// xdpbench's sink runs until -d; the cleanup above kills it
		// (procTimeout bounds it too).
	}
	var cases []XDPCase
	for _, size := range []int{64, 1500} {
		xc := XDPCase{Mode: mode, Size: size}
		if !c.quick {
			// Warm-up: one short run of each, not counted.
			for _, im := range impls {
				if _, _, err := once(ctx, &b, mode, im, cbin, size, 1, gen, meas); err != nil {
					return cases, fmt.Errorf("%s %d B warm-up (%s): %w", mode, size, im.name, err)
				}
			}
		}
		for r := 0; r < c.runs; r++ {
			order := impls
			if r%2 == 1 {
				order = []impl{impls[1], impls[0]}
			}
			for _, im := range order {
				if err := ctx.Err(); err != nil {
					return cases, err
				}
				m, raw, err := once(ctx, &b, mode, im, cbin, size, c.seconds, gen, meas)
				if err != nil {
					return cases, fmt.Errorf("%s %d B run %d (%s): %w", mode, size, r, im.name, err)
				}
				if im.name == "c" {
					xc.C = append(xc.C, num(m, "mpps"))
				} else {
					xc.Go = append(xc.Go, num(m, "mpps"))
					xc.GoMallocs = append(xc.GoMallocs, uint64(num(m, "mallocs")))
				}
				xc.Raw = append(xc.Raw, raw)
				logf("  %-6s %4d B %-6s run %d: %.3f Mpps", mode, size, im.name, r, num(m, "mpps"))
			}
		}
		xc.CMedian, xc.GoMedian = median(xc.C), median(xc.Go)
		if xc.CMedian > 0 {
			xc.Ratio = xc.GoMedian / xc.CMedian
		}
		logf("%s %d B: C %.3f, xdpkit %.3f Mpps (median of %d), ratio %.2f", mode, size, xc.CMedian, xc.GoMedian, c.runs, xc.Ratio)
		cases = append(cases, xc)
	}
	return cases, nil
}

// once runs one measurement of im and returns its JSON result.
func once(ctx context.Context, b *bed, mode string, im impl, cbin string, size, secs, gen, meas int) (map[string]any, json.RawMessage, error) {
	switch mode {
	case "txonly":
		p, err := start(ctx, b.p1.A.NS, meas, im.bin, genArgs(b.p1.A, b.p1.B, b.p1.B.IPv4.Addr(), size, secs)...)
		if err != nil {
			return nil, nil, err
		}
		return p.result()
	case "rxdrop":
		rx, err := start(ctx, b.p1.B.NS, meas, im.bin, "-m", "rxdrop", "-i", b.p1.B.Name, "-q", "0", "-d", strconv.Itoa(secs+10))
		if err != nil {
			return nil, nil, err
		}
		if err := rx.waitReady(); err != nil {
			return nil, nil, err
		}
		g, err := start(ctx, b.p1.A.NS, gen, cbin, genArgs(b.p1.A, b.p1.B, b.p1.B.IPv4.Addr(), size, secs)...)
		if err != nil {
			rx.kill()
			return nil, nil, err
		}
		if _, _, err := g.result(); err != nil {
			rx.kill()
			return nil, nil, fmt.Errorf("generator: %w", err)
		}
		return rx.stopAfter(200 * time.Millisecond)
	case "fwd":
		f, err := start(ctx, b.p1.B.NS, meas, im.bin, "-m", "fwd", "-i", b.p1.B.Name, "-o", b.p2.A.Name,
			"--dst-mac", b.p2.B.MAC.String(), "-d", strconv.Itoa(secs+10))
		if err != nil {
			return nil, nil, err
		}
		if err := f.waitReady(); err != nil {
			return nil, nil, err
		}
		g, err := start(ctx, b.p1.A.NS, gen, cbin, genArgs(b.p1.A, b.p1.B, b.p2.B.IPv4.Addr(), size, secs)...)
		if err != nil {
			f.kill()
			return nil, nil, err
		}
		if _, _, err := g.result(); err != nil {
			f.kill()
			return nil, nil, fmt.Errorf("generator: %w", err)
		}
		return f.stopAfter(200 * time.Millisecond)
	}
	return nil, nil, fmt.Errorf("unknown mode %q", mode)
}
