package topo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// Proc is one of the apps running inside a namespace (through
// `ip netns exec`, which execs the program, so signals reach it directly).
type Proc struct {
	Name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	out    strings.Builder
	stderr strings.Builder
	ready  chan struct{}
	done   chan struct{}
	err    error
	echo   io.Writer
}

// Start runs bin with args inside ns. Lines of its standard output are
// copied to echo (when not nil), except its summary line.
func Start(ns *vethns.NS, bin string, echo io.Writer, args ...string) (*Proc, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, bin}, args...)...)
	p := &Proc{Name: bin, cmd: cmd, ready: make(chan struct{}), done: make(chan struct{}), echo: echo}
	if i := strings.LastIndexByte(bin, '/'); i >= 0 {
		p.Name = bin[i+1:]
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = &lockedWriter{p: p}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		readyOnce := sync.OnceFunc(func() { close(p.ready) })
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if strings.Contains(line, ": ready:") {
				readyOnce()
			}
			if p.echo != nil && !strings.HasPrefix(line, "summary ") {
				fmt.Fprintln(p.echo, line)
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

type lockedWriter struct{ p *Proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}

// Pid is the process id (ip netns exec runs the program in its own
// process).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// WaitReady waits for the program's "ready" line.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return fmt.Errorf("%s exited before it was ready: %v: %s", p.Name, p.Err(), strings.TrimSpace(p.Stderr()))
	case <-t.C:
		return fmt.Errorf("%s not ready after %v", p.Name, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Signal sends sig to the program.
func (p *Proc) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Wait waits for the program to exit, at most timeout; then it kills it.
func (p *Proc) Wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.Err()
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v: killed", p.Name, timeout)
	}
}

// Stop sends SIGTERM and waits (then kills) for the exit.
func (p *Proc) Stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.Err()
	default:
	}
	if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.Wait(timeout)
}

// Done is closed when the program has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the program's exit error (nil for exit code 0).
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// ExitCode is the exit code, -1 while running or when killed by a signal.
func (p *Proc) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Output is what the program wrote on stdout so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Stderr is what the program wrote on stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}
