package apps_test

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// Multi-queue summaries: the fields these tests read.
type mqQueue struct {
	Queue, CPU                       int
	Sent, Valid, Forwarded, Received uint64
	Lost, Chains                     uint64
}

type mqSummary struct {
	Sent, Completed, Valid, Lost, Gaps, Late uint64
	Forwarded, Received, ParseErrors, Jumbo  uint64
	BadIPCsum, BadUDPCsum, BadPayload, Other uint64
	TXRingFull, XDPDropped                   uint64
	MultiBuffer, AccountingOK                bool
	Accounting                               string
	Queues                                   []mqQueue
	XDP                                      []struct{ RXDropped, RXRingFull uint64 }
}

// mqBed is the gen -> fwd -> recv topology over veths with queues queues
// each; xdpfwd, xdpgen and xdprecv serve all of them.
type mqBed struct {
	t      *topo.Topology
	fwd    *topo.Proc
	queues int
}

func newMQBed(t *testing.T, queues, mtu int) *mqBed {
	t.Helper()
	vethns.Require(t)
	tp, err := topo.Create(&topo.Config{Queues: queues, MTU: mtu})
	if err != nil {
		t.Fatal(err)
	}
	b := &mqBed{t: tp, queues: queues}
	t.Cleanup(func() {
		if b.fwd != nil {
			b.fwd.Stop(5 * time.Second)
		}
		if err := tp.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// udp sends count datagrams of size at rate over 2 flows per queue from
// gen-ns through the forwarder to xdprecv, every program on all queues.
func (b *mqBed) udp(t *testing.T, dst netip.Addr, count int, rate, size string) (gen, recv mqSummary) {
	t.Helper()
	q := strconv.Itoa(b.queues)
	rp, err := topo.Start(b.t.Recv, path("xdprecv"), nil, "-i", b.t.Out.B.Name, "-queues", q,
		"-count", fmt.Sprint(count), "-quiet", "-duration", "90s")
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Stop(5 * time.Second)
	if err := rp.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runIn(t, b.t.Gen, 90*time.Second, "xdpgen", "-i", b.t.In.A.Name, "-dst", dst.String(),
		"-queues", q, "-flows", strconv.Itoa(2*b.queues), "-count", fmt.Sprint(count), "-rate", rate, "-size", size, "-quiet",
		// A queue thread of xdpgen is the one that reaps its
		// completions: in an emulated two-CPU guest, next to the
		// forwarder's and the receiver's pinned pollers, it may get no
		// CPU for seconds, which the default 5 s bound takes for a stall.
		"-stall", "60s")
	if code != 0 {
		t.Fatalf("xdpgen: exit %d: %s", code, stderr)
	}
	if err := cli.ParseSummary(stdout, &gen); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rp.Done():
	case <-time.After(5 * time.Second):
		rp.Stop(5 * time.Second)
	}
	<-rp.Done()
	if err := cli.ParseSummary(rp.Output(), &recv); err != nil {
		t.Fatalf("xdprecv: %v: %s", err, rp.Stderr())
	}
	if err := rp.Err(); err != nil {
		t.Errorf("xdprecv: %v: %s", err, rp.Stderr())
	}
	return gen, recv
}

// startFwd starts xdpfwd on every queue.
func (b *mqBed) startFwd(t *testing.T) {
	t.Helper()
	var err error
	b.fwd, err = topo.Start(b.t.Fwd, path("xdpfwd"), nil, "-i", b.t.In.B.Name, "-o", b.t.Out.A.Name,
		"-queues", strconv.Itoa(b.queues), "-quiet")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.fwd.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatalf("%v: %s", err, b.fwd.Stderr())
	}
}

// vethDrops are the drops the four veth ends counted so far, RX and TX:
// Linux 6.1 counts a drop at the peer's ring as the sender's TX drop only,
// newer kernels also as the peer's RX drop (counted twice then, as
// checkLoss does).
func (b *mqBed) vethDrops(t *testing.T) uint64 {
	t.Helper()
	return linkDrops(t, b.t.In.A, b.t.In.B, b.t.Out.A, b.t.Out.B)
}

// run is one attempt: a fresh forwarder, count datagrams through it, and
// the drops the kernel counted on the way (veth rings, XDP_STATISTICS of
// the forwarder's and the receiver's sockets).
func (b *mqBed) run(t *testing.T, dst netip.Addr, count int, rate, size string) (gen, fwd, recv mqSummary, kernelDrops uint64) {
	t.Helper()
	b.startFwd(t)
	before := b.vethDrops(t)
	gen, recv = b.udp(t, dst, count, rate, size)
	fwd = b.stop(t)
	kernelDrops = b.vethDrops(t) - before + recv.XDPDropped
	for _, x := range fwd.XDP {
		kernelDrops += x.RXDropped + x.RXRingFull
	}
	return gen, fwd, recv, kernelDrops
}

// attempts runs up to 3 attempts and returns the first whose datagrams
// all arrived, and how many the last attempt lost. Every datagram the
// receiver missed must have been dropped where the kernel counts it:
// veth's XDP ring (256 frames per queue) drops when softirqs wait for
// ksoftirqd, whatever the pacing; xdpkit must lose nothing of its own.
// Each attempt after a lossy one halves the rate; a machine that drops
// even then (an emulated guest runs ten times slower) ends with the
// counted losses, which the caller accepts in place of exact shares.
func (b *mqBed) attempts(t *testing.T, dst netip.Addr, count int, rate, size string) (gen, fwd, recv mqSummary, lost uint64) {
	t.Helper()
	pps, err := strconv.ParseFloat(strings.TrimSuffix(rate, "k"), 64)
	if err != nil || !strings.HasSuffix(rate, "k") {
		t.Fatalf("attempts: rate %q: want NNk", rate)
	}
	for i := 1; ; i++ {
		var kd uint64
		gen, fwd, recv, kd = b.run(t, dst, count, fmt.Sprintf("%gk", pps), size)
		lost = gen.Sent - min(recv.Valid, gen.Sent) // more than sent: checkShares says so
		if lost > kd {
			t.Errorf("attempt %d at %gk/s: %d datagrams lost, only %d dropped where the kernel counts drops", i, pps, lost, kd)
			return gen, fwd, recv, lost
		}
		if lost == 0 || i == 3 {
			if lost > 0 {
				t.Logf("attempt %d at %gk/s: %d of %d lost, all counted by the kernel (%d drops): this machine drops at every rate tried", i, pps, lost, count, kd)
			}
			return gen, fwd, recv, lost
		}
		t.Logf("attempt %d at %gk/s: %d lost, all counted by the kernel (%d drops): again at half the rate", i, pps, lost, kd)
		pps /= 2
	}
}

// stop ends the forwarder and returns its summary.
func (b *mqBed) stop(t *testing.T) mqSummary {
	t.Helper()
	if err := b.fwd.Stop(10 * time.Second); err != nil {
		t.Errorf("xdpfwd: %v: %s", err, b.fwd.Stderr())
	}
	var s mqSummary
	if err := cli.ParseSummary(b.fwd.Output(), &s); err != nil {
		t.Fatalf("xdpfwd: %v: %s", err, b.fwd.Stderr())
	}
	return s
}

// checkShares: every datagram arrived once, byte-exact, and each queue
// carried exactly its share (xdpgen sends count/queues on each queue and
// veth keeps queue i on queue i through the forwarder). With lost > 0
// (datagrams the kernel dropped and counted, attempts has checked), each
// queue carried at most its share and some of it, and none arrived late
// or twice.
func checkShares(t *testing.T, queues, count int, gen, recv mqSummary, lost uint64) {
	t.Helper()
	if gen.Sent != uint64(count) || gen.Completed < gen.Sent || !gen.AccountingOK {
		t.Errorf("xdpgen: sent %d of %d, completed %d, accounting %v %s", gen.Sent, count, gen.Completed, gen.AccountingOK, gen.Accounting)
	}
	if recv.Valid+lost != uint64(count) || recv.Lost > lost || recv.Late != 0 {
		t.Errorf("xdprecv: %d valid of %d, %d lost (%d counted by the kernel), %d gaps, %d late (socket drops %d)", recv.Valid, count, recv.Lost, lost, recv.Gaps, recv.Late, recv.XDPDropped)
	}
	if recv.BadIPCsum+recv.BadUDPCsum+recv.BadPayload+recv.Other != 0 || !recv.AccountingOK {
		t.Errorf("xdprecv: bad ip %d udp %d payload %d, other %d, accounting %v", recv.BadIPCsum, recv.BadUDPCsum, recv.BadPayload, recv.Other, recv.AccountingOK)
	}
	if len(gen.Queues) != queues || len(recv.Queues) != queues {
		t.Fatalf("%d generator and %d receiver queues, want %d", len(gen.Queues), len(recv.Queues), queues)
	}
	for i := range queues {
		share := uint64(count / queues)
		got := recv.Queues[i].Valid
		if gen.Queues[i].Sent != share || got > share || got == 0 || lost == 0 && got != share {
			t.Errorf("queue %d: sent %d, received %d valid, want %d each (%d lost in all)", i, gen.Queues[i].Sent, got, share, lost)
		}
	}
}

// checkForwarded: the forwarder forwarded what the receiver got, on
// each queue, and lost nothing of its own.
func checkForwarded(t *testing.T, count int, fwd, recv mqSummary, lost uint64) {
	t.Helper()
	if fwd.Forwarded < recv.Valid || lost == 0 && fwd.Forwarded != uint64(count) || fwd.TXRingFull != 0 || fwd.ParseErrors != 0 || !fwd.AccountingOK {
		t.Errorf("xdpfwd: forwarded %d of %d (%d received, %d lost), tx ring full %d, parse errors %d, accounting %v %s",
			fwd.Forwarded, count, recv.Valid, lost, fwd.TXRingFull, fwd.ParseErrors, fwd.AccountingOK, fwd.Accounting)
	}
	for i, q := range fwd.Queues {
		if i < len(recv.Queues) && q.Forwarded < recv.Queues[i].Valid || lost == 0 && q.Forwarded != uint64(count/len(fwd.Queues)) {
			t.Errorf("xdpfwd queue %d (CPU %d): forwarded %d, want %d (%d lost in all)", q.Queue, q.CPU, q.Forwarded, count/len(fwd.Queues), lost)
		}
	}
}

// TestForwardQueues: xdpfwd on 2 and 4 queues forwards 100,000 datagrams
// over IPv4 and 100,000 over IPv6 with none lost, queue i to queue i,
// each queue its share. The rate is paced (50k/s in all) so that no
// veth XDP ring (256 frames per queue) overflows.
func TestForwardQueues(t *testing.T) {
	for _, queues := range []int{2, 4} {
		t.Run(strconv.Itoa(queues), func(t *testing.T) {
			b := newMQBed(t, queues, 0)
			const n = 100000
			for _, dst := range []netip.Addr{b.t.Out.B.IPv4.Addr(), b.t.Out.B.IPv6.Addr()} {
				size := "64"
				if dst.Is6() {
					size = "78"
				}
				gen, fwd, recv, lost := b.attempts(t, dst, n, "50k", size)
				checkShares(t, queues, n, gen, recv, lost)
				checkForwarded(t, n, fwd, recv, lost)
			}
		})
	}
}

// TestForwardJumbo: 9000-byte frames (MTU 9000, multi-buffer chains of
// 2048-byte UMEM frames) through xdpfwd on 2 queues: none lost, every
// payload byte-exact.
func TestForwardJumbo(t *testing.T) {
	b := newMQBed(t, 2, 9000)
	if err := multiBufferErr(t, b.t.Fwd, b.t.In.B.Name); err != nil {
		refusedMultiBuffer(t, err, b.t.Fwd, "-i", b.t.In.B.Name, "-o", b.t.Out.A.Name, "-queues", "2", "-quiet")
		return
	}
	const n = 10000
	gen, fwd, recv, lost := b.attempts(t, b.t.Out.B.IPv4.Addr(), n, "5k", "9000")
	checkShares(t, 2, n, gen, recv, lost)
	if !gen.MultiBuffer || recv.Jumbo < recv.Valid {
		t.Errorf("xdpgen multi-buffer %v; xdprecv got %d multi-buffer packets of %d", gen.MultiBuffer, recv.Jumbo, n)
	}
	checkForwarded(t, n, fwd, recv, lost)
	if !fwd.MultiBuffer {
		t.Errorf("xdpfwd: multi-buffer %v", fwd.MultiBuffer)
	}
	for i, q := range fwd.Queues {
		if q.Chains < recv.Queues[i].Valid || lost == 0 && q.Chains != n/2 {
			t.Errorf("xdpfwd queue %d: %d chains, want %d (%d lost in all)", q.Queue, q.Chains, n/2, lost)
		}
	}
}

// TestDemoQueues: make demo-mq's run, shortened: xdpdemo -queues 2 prints
// the per-queue table, and both queues forwarded.
func TestDemoQueues(t *testing.T) {
	vethns.Require(t)
	stdout, stderr, code := runIn(t, nil, 90*time.Second, "xdpdemo", "-queues", "2", "-duration", "2s", "-rate", "20k", "-quiet")
	if code != 0 {
		t.Fatalf("xdpdemo -queues 2: exit %d: %s\n%s", code, stderr, stdout)
	}
	rows := 0
	in := false
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "per queue"):
			in = true
		case in && len(f) > 4 && (f[0] == "0" || f[0] == "1"):
			if fwd, err := strconv.Atoi(f[2]); err != nil || fwd == 0 {
				t.Errorf("queue %s forwarded %q", f[0], f[2])
			}
			rows++
		}
	}
	if rows != 2 {
		t.Errorf("per-queue table has %d rows, want 2:\n%s", rows, stdout)
	}
}
