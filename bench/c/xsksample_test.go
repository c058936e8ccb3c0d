package cbench

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
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// buildSample compiles xsksample.c with build.sh (-Werror as build's) into
// dir. It needs libxdp and libbpf (Debian: libxdp-dev, libbpf-dev).
func buildSample(tb testing.TB, dir string) string {
	tb.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		if vethns.InCI() {
			tb.Fatalf("gcc is needed to build xsksample: %v", err)
		}
		tb.Skipf("gcc is needed to build xsksample: %v", err)
	}
	out := filepath.Join(dir, "xsksample")
	cmd := exec.Command("sh", "build.sh", "xsksample")
	cmd.Env = append(os.Environ(), "OUT="+out, "EXTRA_CFLAGS=-Werror")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build xsksample (needs libxdp-dev and libbpf-dev): %v\n%s", err, b)
	}
	return out
}

// sample is one xsksample process in a namespace. Its statistics blocks
// go to stdout; the first marks it ready (its socket is bound before).
type sample struct {
	args   []string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	ready  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	out    strings.Builder
	rx, tx uint64 // the last block's cumulative counts
	err    error
}

func startSample(tb testing.TB, ns *vethns.NS, bin string, args ...string) *sample {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	s := &sample{args: args, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
	s.cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, bin}, args...)...)
	s.cmd.Env = append(os.Environ(), "LC_ALL=C")
	s.cmd.Stderr = &lockedBuilder{s: s}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		cancel()
		tb.Fatalf("xsksample %s: %v", s, err)
	}
	if err := s.cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("xsksample %s: %v", s, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		isReady := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.out.WriteString(line + "\n")
			f := strings.Fields(line)
			if len(f) >= 3 && (f[0] == "rx" || f[0] == "tx") {
				if n, err := strconv.ParseUint(f[2], 10, 64); err == nil {
					if f[0] == "rx" {
						s.rx = n
					} else {
						s.tx = n
					}
				}
			}
			s.mu.Unlock()
			if !isReady && len(f) > 0 && strings.HasPrefix(f[0], "sock0@") {
				isReady = true
				close(s.ready)
			}
		}
		s.err = s.cmd.Wait()
		cancel()
		close(s.done)
	}()
	tb.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

type lockedBuilder struct{ s *sample }

func (w *lockedBuilder) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.out.Write(b)
}

func (s *sample) String() string { return strings.Join(s.args, " ") }

func (s *sample) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *sample) waitReady(tb testing.TB) {
	tb.Helper()
	select {
	case <-s.ready:
	case <-s.done:
		tb.Fatalf("xsksample %s exited before it was ready: %v\n%s", s, s.err, s.text())
	case <-time.After(10 * time.Second):
		tb.Fatalf("xsksample %s: no statistics after 10 s\n%s", s, s.text())
	}
}

// stop interrupts the sample (unless it ended by itself), waits for it and
// returns the counts of its last statistics block, printed at exit.
func (s *sample) stop(tb testing.TB) (rx, tx uint64) {
	tb.Helper()
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Fatalf("xsksample %s: %v", s, err)
	}
	<-s.done
	if s.err != nil {
		tb.Fatalf("xsksample %s: %v\n%s", s, s.err, s.text())
	}
	tb.Logf("xsksample %s:%s", s, s.text())
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rx, s.tx
}

// waitCounter waits until the namespace's SNMP counter key has gone up by
// at least want since before, or for 10 s, and returns the rise.
func waitCounter(t *testing.T, ns *vethns.NS, key string, before map[string]int64, want uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := uint64(counters(t, ns)[key] - before[key])
		if got >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSampleFlags checks that bad command lines fail with a message and
// exit code 1, before touching the network.
func TestSampleFlags(t *testing.T) {
	bin := buildSample(t, t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-t"}, "usage"},
		{[]string{"-t", "-i", "lo", "-s", "10"}, "-s 10"},
		{[]string{"-t", "-i", "lo", "-b", "0"}, "-b 0"},
		{[]string{"-t", "-i", "lo", "-G", "02:00:00:00:00:0g"}, "not a MAC address"},
		{[]string{"-l", "-i", "lo", "-c", "-z"}, "exclude"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("xsksample %q: %v, %q; want exit code 1 and %q", tc.args, err, out, tc.want)
		}
	}
}

// TestSample runs each of xsksample's modes on a veth pair, with the
// kernel's UDP layer or xdpbench on the other end.
func TestSample(t *testing.T) {
	vethns.Require(t)
	dir := t.TempDir()
	bin, xbin := buildSample(t, dir), build(t, dir)

	// txonly into the peer's kernel stack: the frames (198.18.0.1 ->
	// 198.18.0.2, port 4096, -G the peer's MAC) are valid UDP/IPv4 of -s
	// bytes less the FCS, checksums included, also for an odd UDP length,
	// so the peer's UDP layer counts them as datagrams for a port nobody
	// listens on.
	for _, size := range []int{64, 1001} {
		t.Run(fmt.Sprintf("TXOnlyIntoKernel/%d", size), func(t *testing.T) {
			p := pair(t)
			if p.B.IPv4.Addr().String() != "198.18.0.2" {
				if out, err := p.B.NS.Exec(context.Background(), "ip", "addr", "add", "198.18.0.2/32", "dev", p.B.Name); err != nil {
					t.Fatalf("ip addr add: %v\n%s", err, out)
				}
			}
			before := counters(t, p.B.NS)
			s := startSample(t, p.A.NS, bin, "-t", "-i", p.A.Name, "-q", "0", "-N", "-c", "-s", strconv.Itoa(size+4), "-G", p.B.MAC.String(), "-d", "1")
			<-s.done
			_, tx := s.stop(t)
			noPorts := waitCounter(t, p.B.NS, "Udp:NoPorts", before, tx*9/10)
			after := counters(t, p.B.NS)
			if tx < 64 {
				t.Errorf("txonly sent %d frames in 1 s, want at least a batch (64)", tx)
			}
			atLeast(t, "Udp:NoPorts", noPorts, 1)
			atMost(t, "Udp:NoPorts", noPorts, tx)
			for _, k := range []string{"Udp:InCsumErrors", "Ip:InHdrErrors", "Ip:InTruncatedPkts", "Ip:InAddrErrors"} {
				if d := after[k] - before[k]; d != 0 {
					t.Errorf("%s went up by %d", k, d)
				}
			}
		})
	}

	// The paced runs below send n frames at 50 kpps. veth drops what its
	// 256-entry ring or the peer's backlog cannot take when the CPUs are
	// busy (two CPUs, shared), so the lower bounds are half of what was
	// sent, not all of it.
	const n, rate = 10000, "50000"

	// rxdrop: the frames the generator sends reach the sample's RX ring.
	t.Run("RXDrop", func(t *testing.T) {
		p := pair(t)
		s := startSample(t, p.B.NS, bin, "-r", "-i", p.B.Name, "-q", "0", "-N", "-c", "-p")
		s.waitReady(t)
		run(t, p.A.NS, xbin, genArgs(p.A, p.B, p.B.IPv4.Addr(), 64, "-n", strconv.Itoa(n), "--rate", rate, "-d", "15")...)
		time.Sleep(200 * time.Millisecond) // frames in flight
		rx, tx := s.stop(t)
		atLeast(t, "rxdrop frames", rx, n/2)
		atMost(t, "rxdrop frames", rx, n+slack)
		if tx != 0 {
			t.Errorf("rxdrop sent %d frames", tx)
		}
	})

	// l2fwd, a hairpin: the generator on A sends from B's address to A's,
	// to B's MAC; the sample on B swaps the MACs and sends each frame back,
	// where A's UDP layer counts it (to A's MAC and address, from a
	// neighbour's). Without the swap A would not take the frames.
	for _, mode := range []string{"busy", "poll"} {
		t.Run("L2Fwd/"+mode, func(t *testing.T) {
			p := pair(t)
			args := []string{"-l", "-i", p.B.Name, "-q", "0", "-N", "-c"}
			if mode == "poll" {
				args = append(args, "-p")
			}
			s := startSample(t, p.B.NS, bin, args...)
			s.waitReady(t)
			before := counters(t, p.A.NS)
			run(t, p.A.NS, xbin, "-m", "txonly", "-i", p.A.Name, "-q", "0", "-s", "64", "-b", "64",
				"--dst-mac", p.B.MAC.String(), "--src-ip", p.B.IPv4.Addr().String(), "--dst-ip", p.A.IPv4.Addr().String(),
				"-n", strconv.Itoa(n), "--rate", rate, "-d", "15")
			// Frames in flight: wait until A counted nearly all (or 10 s).
			back := waitCounter(t, p.A.NS, "Udp:NoPorts", before, n*9/10)
			rx, tx := s.stop(t)
			atLeast(t, "l2fwd received", rx, n/2)
			atMost(t, "l2fwd received", rx, n+slack)
			atLeast(t, "frames back at A (Udp:NoPorts)", back, tx/2)
			atMost(t, "frames back at A (Udp:NoPorts)", back, n)
			if tx != rx {
				t.Errorf("l2fwd sent %d frames, received %d", tx, rx)
			}
		})
	}
}
