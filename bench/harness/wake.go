package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Wake is the wake-up cost comparison (-only wake): a waiter sleeps until
// a named pipe is readable, woken by a waker on the other CPU that writes
// Count bytes one at a time, Gap apart; C's waiter sleeps in poll(2)
// (bench/c/wakebench.c), Go's (bench/wakebench) either on an epoll set
// registered with the runtime's network poller ("go") or in ppoll on its
// own thread ("go-thread"), the ways the C reference's receiver and an
// rxpath.Poller with Config.RuntimeSleep and by default (while packets
// flow) sleep. It isolates the
// part of what the NAPI deferral rows' receivers pay per wake-up that is
// the wake-up itself.
type Wake struct {
	Count   int       `json:"count"`
	GapNs   int64     `json:"gap_ns"`
	Pinned  bool      `json:"pinned"`
	GenCPU  int       `json:"gen_cpu"`
	MeasCPU int       `json:"meas_cpu"`
	Runs    []WakeRun `json:"runs"` // the waiters in the order they ran, round by round
}

// WakeRun is one waiter's JSON line.
type WakeRun struct {
	Impl        string `json:"impl"` // "c", "go" or "go-thread"
	Wakes       int    `json:"wakes"`
	Bytes       int    `json:"bytes"`
	CPUNs       int64  `json:"cpu_ns"`
	CtxSwitches int64  `json:"ctx_switches"`
}

// PerWake is the waiter's CPU time per wake-up, in µs.
func (r WakeRun) PerWake() float64 {
	if r.Wakes == 0 {
		return 0
	}
	return float64(r.CPUNs) / 1e3 / float64(r.Wakes)
}

// The wake-ups of -only wake: 5000 a second, about the rate of the
// 300 kpps NAPI deferral row's (make bench's results.json, wakeups).
const (
	wakeCount = 10000
	wakeGap   = 200 * time.Microsecond
)

func runWake(ctx context.Context, c *config, dir string) (*Wake, error) {
	cbin, gobin := filepath.Join(dir, "wakebench-c"), filepath.Join(dir, "wakebench-go")
	if err := buildC(ctx, c, "wakebench", cbin); err != nil {
		return nil, err
	}
	if err := buildGo(ctx, c, "./bench/wakebench", gobin); err != nil {
		return nil, err
	}
	w := &Wake{Count: wakeCount, GapNs: int64(wakeGap), Pinned: c.pin, GenCPU: c.genCPU, MeasCPU: c.measCPU}
	runs := c.runs
	if c.quick {
		w.Count, runs = 500, 1
	}
	waiters := [][]string{{cbin}, {gobin, "-m", "wait"}, {gobin, "-m", "wait-thread"}}
	logf("wake: %d rounds of %d wake-ups %v apart, the three waiters in turn, after a warm-up round", runs, w.Count, wakeGap)
	for i := -1; i < runs; i++ {
		// Rotate which waiter goes first, so that none always runs
		// first (each still follows the same one within a round).
		k := (i + 1) % len(waiters)
		order := slices.Concat(waiters[k:], waiters[:k])
		for _, waiter := range order {
			r, err := wakeRun(ctx, c, dir, waiter, gobin, w.Count)
			if err != nil {
				return nil, err
			}
			if i >= 0 {
				w.Runs = append(w.Runs, r)
			}
		}
	}
	return w, nil
}

// wakeRun runs one waiter (argv, to which the pipe and the count are
// added) against the waker, and reads its line.
func wakeRun(ctx context.Context, c *config, dir string, argv []string, gobin string, n int) (WakeRun, error) {
	var r WakeRun
	tmp, err := os.MkdirTemp(dir, "wake")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(tmp)
	fifo := filepath.Join(tmp, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return r, os.NewSyscallError("mkfifo", err)
	}
	bound := 2*time.Duration(n)*wakeGap + 10*time.Second
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	gen, meas := -1, -1
	if c.pin {
		gen, meas = c.genCPU, c.measCPU
	}
	wargv := onCPU(meas, slices.Concat(argv, []string{fifo, strconv.Itoa(n)})...)
	wcmd := exec.CommandContext(ctx, wargv[0], wargv[1:]...)
	// Neither half outlives the harness (taskset execs the program, which
	// keeps the signal).
	wcmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	wcmd.Stdout = &out
	// The waiter says on stderr when the pipe is open: the waker's open
	// would otherwise block, or the waiter miss the first bytes' wake-ups.
	errw := &readyWriter{ready: make(chan struct{})}
	wcmd.Stderr = errw
	if err := wcmd.Start(); err != nil {
		return r, err
	}
	exited := make(chan error, 1)
	go func() { exited <- wcmd.Wait() }()
	select {
	case <-errw.ready:
	case err := <-exited:
		return r, fmt.Errorf("%s: ended before it was ready: %v\n%s", strings.Join(wargv, " "), err, errw)
	}
	kargv := onCPU(gen, gobin, "-m", "wake", fifo, strconv.Itoa(n), wakeGap.String())
	kcmd := exec.CommandContext(ctx, kargv[0], kargv[1:]...)
	kcmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if b, err := kcmd.CombinedOutput(); err != nil {
		_ = wcmd.Process.Kill()
		<-exited
		return r, fmt.Errorf("%s: %w\n%s", strings.Join(kargv, " "), err, b)
	}
	if err := <-exited; err != nil {
		return r, fmt.Errorf("%s: %w\n%s", strings.Join(wargv, " "), err, errw)
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); err != nil {
		return r, fmt.Errorf("%s: %w: %q", strings.Join(wargv, " "), err, out.String())
	}
	if r.Bytes != n || r.Wakes <= 0 {
		return r, fmt.Errorf("%s: read %d of %d bytes in %d wake-ups", strings.Join(wargv, " "), r.Bytes, n, r.Wakes)
	}
	return r, nil
}

// readyWriter is a waiter's stderr: it keeps what the waiter writes and
// closes ready once the waiter's "wakebench: ready" line came.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	seen  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.seen && bytes.Contains(w.buf.Bytes(), []byte("wakebench: ready\n")) {
		w.seen = true
		close(w.ready)
	}
	return len(p), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// wakeWaiters names the waiters of the wake-up table, in its order.
var wakeWaiters = []struct{ impl, name, short string }{
	{"c", "C, poll(2)", "C"},
	{"go", "Go, runtime poller", "Go"},
	{"go-thread", "Go, ppoll on its thread (rxpath.Poller while packets flow)", "Go thread"},
}

// writeWake writes the wake-up cost table.
func writeWake(b *strings.Builder, w *Wake) {
	where := "a waiter sleeps until a pipe is readable, woken by a writer"
	if w.Pinned {
		where = fmt.Sprintf("a waiter on CPU %d sleeps until a pipe is readable, woken by a writer on CPU %d", w.MeasCPU, w.GenCPU)
	}
	fmt.Fprintf(b, "\n### Wake-up cost\n\n"+
		"In each run %s that writes %d bytes one at a time, %v apart "+
		"(`-only wake`: bench/c/wakebench.c sleeps in poll(2), as the C reference's receiver does; bench/wakebench "+
		"on an epoll set registered with the Go runtime's poller, as an rxpath.Poller does when idle or with Config.RuntimeSleep, "+
		"or in ppoll on its own thread, as one does by default while packets flow). CPU is the waiter's process CPU time per "+
		"wake-up (all its threads), min / median / max over the runs; *spread* is the range of Go/C over the rounds as they ran "+
		"(each round runs every waiter once, the first waiter rotating, after a warm-up round).\n\n", where, w.Count, time.Duration(w.GapNs))
	b.WriteString("| waiter | runs | wake-ups per run | CPU µs per wake-up | context switches per wake-up |\n|---|---:|---:|---:|---:|\n")
	med := map[string]float64{}
	n := 0 // waiters per round
	for _, wt := range wakeWaiters {
		var cpu, sw, wakes []float64
		for _, r := range w.Runs {
			if r.Impl == wt.impl && r.Wakes > 0 {
				cpu = append(cpu, r.PerWake())
				sw = append(sw, float64(r.CtxSwitches)/float64(r.Wakes))
				wakes = append(wakes, float64(r.Wakes))
			}
		}
		if slices.ContainsFunc(w.Runs, func(r WakeRun) bool { return r.Impl == wt.impl }) {
			n++
		}
		if len(cpu) == 0 {
			continue
		}
		med[wt.impl] = median(cpu)
		fmt.Fprintf(b, "| %s | %d | %.0f-%.0f | %.2f / %.2f / %.2f | %.2f |\n", wt.name, len(cpu), slices.Min(wakes), slices.Max(wakes),
			slices.Min(cpu), med[wt.impl], slices.Max(cpu), median(sw))
	}
	if n == 0 || med["c"] == 0 {
		return
	}
	b.WriteString("\n")
	for _, wt := range wakeWaiters[1:] {
		var pairs []float64
		for i := 0; i+n <= len(w.Runs); i += n {
			var c, g float64
			for _, r := range w.Runs[i : i+n] {
				switch r.Impl {
				case "c":
					c = r.PerWake()
				case wt.impl:
					g = r.PerWake()
				}
			}
			if c > 0 && g > 0 {
				pairs = append(pairs, g/c)
			}
		}
		if med[wt.impl] > 0 && len(pairs) > 0 {
			fmt.Fprintf(b, "%s/C of the medians: %.2f (%+.2f µs per wake-up); spread %.2f-%.2f.\n",
				wt.short, med[wt.impl]/med["c"], med[wt.impl]-med["c"], slices.Min(pairs), slices.Max(pairs))
		}
	}
}
