package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestMain(m *testing.M) {
	vethns.Exclusive() // one namespace-test package at a time, host-wide
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

// buildSelf compiles xdpkitbench into dir.
func buildSelf(tb testing.TB, dir string) string {
	tb.Helper()
	out := filepath.Join(dir, "xdpkitbench")
	if b, err := exec.Command("go", "build", "-o", out, ".").CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// buildC compiles the C reference (for its sink and generator).
func buildC(tb testing.TB, dir string) string {
	tb.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		if vethns.InCI() {
			tb.Fatalf("gcc is needed to build xdpbench: %v", err)
		}
		tb.Skipf("gcc is needed to build xdpbench: %v", err)
	}
	out := filepath.Join(dir, "xdpbench")
	cmd := exec.Command("sh", "../c/build.sh")
	cmd.Env = append(os.Environ(), "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build xdpbench: %v\n%s", err, b)
	}
	return out
}

func TestFlags(t *testing.T) {
	bin := buildSelf(t, t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", "bogus", "-i", "lo"}, "unknown mode"},
		{[]string{"-m", "txonly"}, "-i IF is required"},
		{[]string{"-m", "txonly", "-i", "lo"}, "needs --dst-mac"},
		{[]string{"-m", "txonly", "-i", "lo", "--dst-mac", "02:00:00:00:00:0g"}, "MAC address"},
		{[]string{"-m", "txonly", "-i", "lo", "--dst-mac", "02:00:00:00:00:01", "-s", "41"}, "-s"},
		{[]string{"-m", "rxdrop", "-i", "lo", "-r", "1000"}, "power of two"},
		{[]string{"-m", "rxdrop", "-i", "lo", "-f", "3000"}, "2048 or 4096"},
		{[]string{"-m", "rxdrop", "-i", "lo", "-b", "4096"}, "larger than the rings"},
		{[]string{"-m", "fwd", "-i", "lo", "--dst-mac", "02:00:00:00:00:01"}, "needs -o"},
		{[]string{"-m", "fwd", "-i", "lo", "-o", "lo"}, "needs --dst-mac"}, // a hairpin rewrites as fwd does
		{[]string{"-m", "rxdrop", "-i", "lo", "--fill-frames", "512"}, "only for fwd"},
		{[]string{"-m", "rxdrop", "-i", "lo", "--tx-budget", "64"}, "rxdrop has no TX ring"},
		{[]string{"-m", "rxdrop", "-i", "lo", "--napi-defer", "2"}, "go together"},
		{[]string{"-m", "fwd", "-i", "lo", "-o", "lo", "--dst-mac", "02:00:00:00:00:01", "--napi-defer", "2", "--napi-gro-flush", "200us"}, "only for rxdrop"},
		{[]string{"-m", "fwd", "-i", "lo", "-o", "lo", "--dst-mac", "02:00:00:00:00:01", "--fill-frames", "4096"}, "--fill-frames 4096"},
		{[]string{"-m", "rxdrop", "-i", "xk-no-such-if"}, "xk-no-such-if"},
		{[]string{"--mode", "rxdrop", "--iface", "lo", "--duration", "0"}, "-d"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("xdpkitbench %v: err = %v, want exit code 1; output:\n%s", tc.args, err, out)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("xdpkitbench %v: output %q does not say %q", tc.args, out, tc.want)
		}
	}
}

// runCmd runs bin in ns and returns its JSON line; ready, if not nil, is
// closed once the program said it is ready, and closing stop then
// interrupts it.
func runCmd(ns *vethns.NS, ready chan<- struct{}, stop <-chan struct{}, bin string, args ...string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, bin}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if ready != nil && strings.Contains(sc.Text(), ": ready") {
			close(ready)
			ready = nil
			if stop != nil {
				go func() {
					select {
					case <-stop:
						_ = cmd.Process.Signal(os.Interrupt)
					case <-ctx.Done():
					}
				}()
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s %v: %w\n%s", filepath.Base(bin), args, err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &m); err != nil {
		return nil, fmt.Errorf("%s %v: not one JSON line: %w\n%s", filepath.Base(bin), args, err, stdout.String())
	}
	m["_line"] = strings.TrimSpace(stdout.String())
	return m, nil
}

func run(t *testing.T, ns *vethns.NS, bin string, args ...string) map[string]any {
	t.Helper()
	m, err := runCmd(ns, nil, nil, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %v\n  %s", filepath.Base(bin), args, m["_line"])
	return m
}

type result struct {
	m   map[string]any
	err error
}

// background runs bin in ns until stop is closed; it returns once the
// program is ready. wait returns its result.
func background(t *testing.T, ns *vethns.NS, stop <-chan struct{}, bin string, args ...string) (wait func() map[string]any) {
	t.Helper()
	ready := make(chan struct{})
	res := make(chan result, 1)
	go func() {
		m, err := runCmd(ns, ready, stop, bin, args...)
		res <- result{m, err}
	}()
	select {
	case <-ready:
	case r := <-res:
		t.Fatalf("%s %v exited before it was ready: %v", filepath.Base(bin), args, r.err)
	case <-time.After(15 * time.Second):
		t.Fatalf("%s %v: not ready after 15 s", filepath.Base(bin), args)
	}
	return func() map[string]any {
		t.Helper()
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Logf("%s %v\n  %s", filepath.Base(bin), args, r.m["_line"])
		return r.m
	}
}

func num(m map[string]any, k string) float64 {
	f, _ := m[k].(float64)
	return f
}

// countedOver is the mallocs_frames a receiver of frames packets reports:
// from its first packet to the last multiple of 16384 (allocEvery), none
// below that.
func countedOver(frames float64) float64 {
	if n := math.Floor(frames/allocEvery) * allocEvery; n > 0 {
		return n - 1
	}
	return 0
}

// TestModes runs each mode briefly on veth pairs with the C reference as
// the peer and checks the counts and that the measured loop allocated
// nothing.
func TestModes(t *testing.T) {
	vethns.Require(t)
	dir := t.TempDir()
	bin, cbin := buildSelf(t, dir), buildC(t, dir)
	const n = 30000
	gen := func(from, to *vethns.Link, dst string, size int) []string {
		return []string{"-m", "txonly", "-i", from.Name, "-s", strconv.Itoa(size), "--dst-mac", to.MAC.String(),
			"--src-ip", from.IPv4.Addr().String(), "--dst-ip", dst, "-n", strconv.Itoa(n), "-d", "10"}
	}
	// paced is gen for the receivers: unpaced, a fast generator fills the
	// receiver's RX ring faster than it drains it, and the kernel drops
	// the rest (rx_ring_full; in CI on an AMD EPYC Zen 5, 24718 of 30000
	// frames at 1500 B), too many for the allocation count, which needs
	// allocEvery frames to arrive. 100 kpps: 0.3 s for n.
	paced := func(from, to *vethns.Link, dst string, size int) []string {
		return append(gen(from, to, dst, size), "--rate", "100000")
	}

	t.Run("TXOnly", func(t *testing.T) {
		p := vethns.NewPair(t, vethns.NewNS(t), vethns.NewNS(t), nil)
		stop := make(chan struct{})
		sink := background(t, p.B.NS, stop, cbin, "-m", "sink", "-i", p.B.Name, "-d", "20")
		tx := run(t, p.A.NS, bin, gen(p.A, p.B, p.B.IPv4.Addr().String(), 64)...)
		time.Sleep(200 * time.Millisecond)
		close(stop)
		rx := sink()
		if num(tx, "frames") != n || num(tx, "submitted") != n || num(tx, "tx_invalid_descs") != 0 {
			t.Errorf("txonly: %v, want %d frames sent and completed", tx, n)
		}
		if a := num(tx, "mallocs"); a != 0 {
			t.Errorf("txonly loop allocated %v times", a)
		}
		if f := num(rx, "frames"); f < n*9/10 || f > n+100 {
			t.Errorf("sink saw %v frames, want about %d", f, n)
		}
	})

	t.Run("RXDrop", func(t *testing.T) {
		p := vethns.NewPair(t, vethns.NewNS(t), vethns.NewNS(t), nil)
		stop := make(chan struct{})
		res := background(t, p.B.NS, stop, bin, "-m", "rxdrop", "-i", p.B.Name, "-d", "20")
		run(t, p.A.NS, cbin, paced(p.A, p.B, p.B.IPv4.Addr().String(), 64)...)
		time.Sleep(200 * time.Millisecond)
		close(stop)
		rx := res()
		f := num(rx, "frames")
		if f == 0 || f > n+100 || num(rx, "rx_invalid_descs") != 0 {
			t.Errorf("rxdrop: %v", rx)
		}
		if got := f + num(rx, "rx_dropped") + num(rx, "rx_ring_full"); got < n*9/10 {
			t.Errorf("rxdrop: frames + drops = %v, want about %d", got, n)
		}
		if a, over := num(rx, "mallocs"), num(rx, "mallocs_frames"); a != 0 || over == 0 || over != countedOver(f) {
			t.Errorf("rxdrop loop allocated %v times over %v of %v frames, want 0 over %v", a, over, f, countedOver(f))
		}
		if e := rx["ended"]; e != "signal" {
			t.Errorf("rxdrop ended on %v, not on the SIGINT", e)
		}
	})

	t.Run("Forward", func(t *testing.T) {
		a, b, c := vethns.NewNS(t), vethns.NewNS(t), vethns.NewNS(t)
		p1, p2 := vethns.NewPair(t, a, b, nil), vethns.NewPair(t, b, c, nil)
		stopSink, stopFwd := make(chan struct{}), make(chan struct{})
		sink := background(t, c, stopSink, cbin, "-m", "sink", "-i", p2.B.Name, "-d", "20")
		// --tx-budget sets XDP_MAX_TX_SKB_BUDGET on the out socket, the
		// one with a TX ring (the in socket has none).
		fwd := background(t, b, stopFwd, bin, "-m", "fwd", "-i", p1.B.Name, "-o", p2.A.Name,
			"--dst-mac", p2.B.MAC.String(), "-d", "20", "--tx-budget", "256")
		run(t, a, cbin, paced(p1.A, p1.B, p2.B.IPv4.Addr().String(), 1500)...)
		time.Sleep(200 * time.Millisecond)
		close(stopFwd)
		f := fwd()
		time.Sleep(200 * time.Millisecond)
		close(stopSink)
		s := sink()
		fr := num(f, "frames")
		if fr == 0 || num(f, "tx_completed") != fr || num(f, "tx_full") != 0 {
			t.Errorf("fwd: %v, want frames > 0, all completed", f)
		}
		// The kernel took the budget, or said it has none (before 6.17).
		if b := num(f, "tx_budget"); b != 256 && f["no_tx_budget"] != true {
			t.Errorf("fwd: tx_budget %v, no_tx_budget %v: want the 256 of --tx-budget, or a kernel without it", b, f["no_tx_budget"])
		}
		if got := num(s, "frames"); got < fr*9/10 || got > fr+100 {
			t.Errorf("sink saw %v frames, the forwarder sent %v", got, fr)
		}
		if a, over := num(f, "mallocs"), num(f, "mallocs_frames"); a != 0 || over == 0 || over != countedOver(fr) {
			t.Errorf("fwd loop allocated %v times over %v of %v frames, want 0 over %v", a, over, fr, countedOver(fr))
		}
		if e := f["ended"]; e != "signal" {
			t.Errorf("fwd ended on %v, not on the SIGINT", e)
		}
	})

	// fwd --l3 into the far end's kernel stack: every datagram that
	// reaches its UDP socket arrived with a valid IPv4 header checksum
	// (the kernel drops the others) and TTL 63, one less than the C
	// generator's 64.
	t.Run("Route", func(t *testing.T) {
		const n = 20000 // more than allocEvery: the l3 loop's allocations are counted
		a, b, c := vethns.NewNS(t), vethns.NewNS(t), vethns.NewNS(t)
		p1, p2 := vethns.NewPair(t, a, b, nil), vethns.NewPair(t, b, c, nil)
		sink := vethns.NewTTLSink(t, c, netip.AddrPortFrom(p2.B.IPv4.Addr(), 9000))
		before, err := c.Counters()
		if err != nil {
			t.Fatal(err)
		}
		stopFwd := make(chan struct{})
		fwd := background(t, b, stopFwd, bin, "-m", "fwd", "--l3", "-i", p1.B.Name, "-o", p2.A.Name,
			"--dst-mac", p2.B.MAC.String(), "-d", "20")
		g := gen(p1.A, p1.B, p2.B.IPv4.Addr().String(), 100)
		g = append(g[:len(g)-4], "-n", strconv.Itoa(n), "--rate", "50000", "--dst-port", "9000", "-d", "10")
		run(t, a, cbin, g...)
		time.Sleep(200 * time.Millisecond)
		close(stopFwd)
		f := fwd()
		ttls := sink.Stop()
		after, err := c.Counters()
		if err != nil {
			t.Fatal(err)
		}
		fr := num(f, "frames")
		// frames counts what was received, not_routed what of it was not
		// sent on (the kernel's own IPv6 traffic with hop limit 1, ...).
		if fr == 0 || num(f, "tx_completed") != fr-num(f, "not_routed") || num(f, "tx_full") != 0 || f["l3"] != true || num(f, "not_routed") > 100 {
			t.Errorf("fwd --l3: %v, want frames > 0, all completed, (almost) none not routed", f)
		}
		t.Logf("datagrams received by TTL: %v", ttls)
		if got, sent := float64(ttls[63]), num(f, "tx_completed"); got < sent*9/10 || len(ttls) != 1 {
			t.Errorf("datagrams received by TTL: %v, want about %v, all with TTL 63", ttls, sent)
		}
		for _, k := range []string{"Ip:InHdrErrors", "Ip:InCsumErrors", "Udp:InCsumErrors"} {
			if d := after[k] - before[k]; d != 0 {
				t.Errorf("%s went up by %d at the far end", k, d)
			}
		}
		if a, over := num(f, "mallocs"), num(f, "mallocs_frames"); a != 0 || over == 0 || over != countedOver(fr) {
			t.Errorf("fwd --l3 loop allocated %v times over %v of %v frames, want 0 over %v", a, over, fr, countedOver(fr))
		}
	})
}
