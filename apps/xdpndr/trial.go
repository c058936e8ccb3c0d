package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
)

// genTolerance is how far below the asked rate the generator may stay
// and the trial still count: a trial the generator could not drive at its
// rate says nothing about the device at that rate, so it fails.
const genTolerance = 0.05

// judge is the verdict of a trial at rate: sent by the generator in
// seconds of sending at achieved packets/s, received by the receiver,
// against the loss bound in percent.
func judge(rate float64, sent, received uint64, seconds, achieved, bound float64) Trial {
	t := Trial{RatePPS: rate, Sent: sent, Received: received, AchievedPPS: achieved, Seconds: seconds}
	if sent == 0 {
		t.Reason = "the generator sent nothing"
		return t
	}
	if received < sent {
		t.LossPct = float64(sent-received) / float64(sent) * 100
	}
	switch {
	case achieved < rate*(1-genTolerance):
		t.Reason = fmt.Sprintf("the generator reached %.0f pps, short of the rate", achieved)
	case t.LossPct > bound:
		t.Reason = fmt.Sprintf("loss %.4g%% above the bound %g%%", t.LossPct, bound)
	default:
		t.Pass = true
	}
	return t
}

// parseResolution parses -resolution: a percentage of the upper bound
// ("2%") or packets/s ("1000", "5k").
func parseResolution(s string) (v float64, relative bool, err error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !(f > 0) || f >= 100 {
			return 0, false, fmt.Errorf("-resolution %q: want a percentage in (0, 100)", s)
		}
		return f / 100, true, nil
	}
	f, err := cli.ParseRate(s)
	if err != nil || f < 1 {
		return 0, false, fmt.Errorf("-resolution %q: want a percentage (2%%) or packets/s of at least 1 (1000, 5k)", s)
	}
	return f, false, nil
}

// proc is a program started by xdpndr, in a namespace through `ip netns
// exec` (which execs the program: the pid is the program's) or directly.
// Its standard output is read line by line; stderr is kept for errors.
type proc struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	errb  strings.Builder
	ready chan struct{}
	done  chan struct{}
	err   error
}

// start runs bin with args in the namespace ns ("" for xdpndr's own).
// isReady tells the line that says the program is ready (nil: none).
func start(ns, bin string, isReady func(line string) bool, args ...string) (*proc, error) {
	var cmd *exec.Cmd
	if ns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	p := &proc{name: filepath.Base(bin), cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = (*stderrWriter)(p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		once := sync.OnceFunc(func() { close(p.ready) })
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			if isReady != nil && isReady(line) {
				once()
			}
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

type stderrWriter proc

func (w *stderrWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.errb.Len() < 64<<10 {
		w.errb.Write(b)
	}
	return len(b), nil
}

// failure describes how the program ended, with its stderr.
func (p *proc) failure(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("%s: %w: %s", p.name, err, strings.Join(strings.Fields(p.errb.String()), " "))
}

// waitReady waits for the ready line, the program's exit or timeout.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return p.failure(fmt.Errorf("exited before it was ready (%v)", p.exitErr()))
	case <-t.C:
		return p.failure(fmt.Errorf("not ready after %v", timeout))
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// wait waits for the exit, at most timeout; then it kills the program.
// It returns the exit error.
func (p *proc) wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitErr()
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("did not exit within %v: killed", timeout)
	}
}

// stop sends SIGTERM (unless the program has exited) and waits for the
// exit, killing it after timeout.
func (p *proc) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.wait(timeout)
}

// lastJSON unmarshals into v the last output line that prefix starts
// ("summary " for xdpgen's summary line, `{"Type":"summary"` for
// xdprecv -json's), the prefix itself part of the JSON when keep.
func (p *proc) lastJSON(prefix string, keep bool, v any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(p.lines[i], prefix); ok {
			if keep {
				rest = p.lines[i]
			}
			return json.Unmarshal([]byte(rest), v)
		}
	}
	return p.failureLocked(errors.New("no summary in its output"))
}

func (p *proc) failureLocked(err error) error {
	return fmt.Errorf("%s: %w: %s", p.name, err, strings.Join(strings.Fields(p.errb.String()), " "))
}

// The fields xdpndr reads from the programs' summaries.
type genSummary struct {
	Sent         uint64
	Seconds      float64
	AccountingOK bool
}

type recvSummary struct {
	Valid, Duplicates uint64
	Packets           uint64
	AccountingOK      bool
}

// side is where a program runs: its namespace and interface.
type side struct {
	ns, iface string
}

// trialRunner runs trials: per trial a fresh xdprecv (its sequence
// numbers start over with each xdpgen run), ready before xdpgen starts
// sending rate packets/s for the trial's length; the receiver stops by
// itself once it has every packet sent, or is stopped drain after the
// generator's exit.
type trialRunner struct {
	bin               string
	gen, recv         side
	dst               string
	genArgs, recvArgs []string
	trial, drain      time.Duration
	loss              float64
	ctx               context.Context
}

func (r *trialRunner) run(rate float64) (Trial, error) {
	t0 := time.Now()
	count := uint64(math.Round(rate * r.trial.Seconds()))
	if count == 0 {
		count = 1
	}
	// Bounded: the receiver's own -duration, the generator's -count at
	// its rate (with -duration as a cap), and the timeouts below.
	limit := 3*r.trial + 30*time.Second
	recvArgs := append([]string{"-i", r.recv.iface, "-json", "-count", strconv.FormatUint(count, 10),
		"-duration", limit.String()}, r.recvArgs...)
	recv, err := start(r.recv.ns, filepath.Join(r.bin, "xdprecv"), func(l string) bool { return strings.HasPrefix(l, `{"Type":"ready"`) }, recvArgs...)
	if err != nil {
		return Trial{}, err
	}
	defer recv.stop(5 * time.Second)
	if err := recv.waitReady(r.ctx, 30*time.Second); err != nil {
		return Trial{}, err
	}
	genArgs := append([]string{"-i", r.gen.iface, "-dst", r.dst, "-rate", strconv.FormatFloat(rate, 'f', 0, 64),
		"-count", strconv.FormatUint(count, 10), "-duration", (2 * r.trial).String(), "-quiet"}, r.genArgs...)
	gen, err := start(r.gen.ns, filepath.Join(r.bin, "xdpgen"), nil, genArgs...)
	if err != nil {
		return Trial{}, err
	}
	var genErr error
	select {
	case <-gen.done:
		genErr = gen.exitErr()
	case <-r.ctx.Done():
		_ = gen.stop(5 * time.Second)
		return Trial{}, r.ctx.Err()
	case <-time.After(limit):
		genErr = gen.stop(5 * time.Second)
		if genErr == nil {
			genErr = fmt.Errorf("still sending after %v", limit)
		}
	}
	if genErr != nil {
		return Trial{}, gen.failure(genErr)
	}
	var gs genSummary
	if err := gen.lastJSON("summary ", false, &gs); err != nil {
		return Trial{}, err
	}
	// The receiver exits by itself with every packet (-count); else it
	// is stopped after the drain.
	select {
	case <-recv.done:
	case <-time.After(r.drain):
	case <-r.ctx.Done():
		return Trial{}, r.ctx.Err()
	}
	if err := recv.stop(10 * time.Second); err != nil {
		return Trial{}, recv.failure(err)
	}
	var rs recvSummary
	if err := recv.lastJSON(`{"Type":"summary"`, true, &rs); err != nil {
		return Trial{}, err
	}
	if !gs.AccountingOK || !rs.AccountingOK {
		return Trial{}, errors.New("a program did not get all its UMEM frames back")
	}
	received := rs.Valid - min(rs.Valid, rs.Duplicates)
	achieved := 0.0
	if gs.Seconds > 0 {
		achieved = float64(gs.Sent) / gs.Seconds
	}
	t := judge(rate, gs.Sent, received, time.Since(t0).Seconds(), achieved, r.loss)
	return t, nil
}
