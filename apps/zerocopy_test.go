package apps_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// zeroCopyProbe asks the library whether ifname in ns binds in zero-copy
// mode: a ModeZeroCopy bind either succeeds (and the socket says
// ZeroCopy) or fails with ErrNotSupported and the reason; a device that
// advertises zero-copy must bind.
func zeroCopyProbe(t *testing.T, ns *vethns.NS, ifname string) bool {
	t.Helper()
	var zc bool
	err := ns.Do(func() error {
		info, err := xsk.Device(ifname)
		if err != nil {
			return err
		}
		u, err := umem.New(nil)
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(ifname, 0, u, &xsk.Config{Mode: xsk.ModeZeroCopy})
		switch {
		case err == nil:
			zc = s.ZeroCopy()
			s.Close()
			if !zc {
				return errors.New("ModeZeroCopy bound, but the socket is not in zero-copy mode")
			}
		case !errors.Is(err, xsk.ErrNotSupported):
			return fmt.Errorf("ModeZeroCopy: %w (want success or ErrNotSupported)", err)
		case info.XDPFeatures&xsk.XDPXSKZeroCopy != 0:
			return fmt.Errorf("%s advertises zero-copy, but: %w", ifname, err)
		}
		t.Logf("%s: driver %s, zero-copy %v (%v)", ifname, info.Driver, zc, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return zc
}

// zcSummary is what the zero-copy test reads of the three summaries.
type zcSummary struct {
	Sent, Completed, Frames, NotCompleted uint64
	Valid, Late, Lost                     uint64
	BadIPCsum, BadUDPCsum, BadPayload     uint64
	XDPDropped, Forwarded, TXRingFull     uint64
	ZeroCopy, AccountingOK                bool
	XDP                                   []struct{ RXDropped, RXRingFull uint64 }
}

// TestZeroCopyPath: xdpgen -> xdpfwd -> xdprecv over two NIC pairs
// (virtio_net in make kernels' QEMU guests), each program in its own
// namespace, in the mode the library's probe finds for each NIC
// (zero-copy where the driver and kernel have it): each program says
// that mode in its ready line or summary, and every frame is accounted
// for: sent = completed, and each one the receiver did not get was
// dropped where the kernel counts drops. While xdpgen runs, pings
// through its interface are answered: a TX-only socket, in zero-copy
// mode too, leaves its queue's receive side working (the library stocks
// its Fill ring). The rate is modest: QEMU's hub drops frames, uncounted,
// when a NIC's receive queue backs up. Without two NIC pairs it runs the
// same over veth pairs, where the probe finds copy mode.
func TestZeroCopyPath(t *testing.T) {
	vethns.Require(t)
	gen, fwd, recv := vethns.NewNS(t), vethns.NewNS(t), vethns.NewNS(t)
	var in, out *vethns.Pair
	if vethns.NICPairs() >= 2 {
		in = vethns.NewNICPair(t, gen, fwd, nil)
		out = vethns.NewNICPair(t, fwd, recv, nil)
	} else {
		t.Logf("fewer than two NIC pairs in %s: the path over veth (copy mode); make kernels runs it on virtio_net", vethns.NICPairsEnv)
		in = vethns.NewPair(t, gen, fwd, nil)
		out = vethns.NewPair(t, fwd, recv, nil)
	}
	tp, err := topo.Wire(gen, fwd, recv, in, out)
	if err != nil {
		t.Fatal(err)
	}
	zcGen, zcFwd, zcRecv := zeroCopyProbe(t, gen, in.A.Name), zeroCopyProbe(t, fwd, in.B.Name), zeroCopyProbe(t, recv, out.B.Name)

	const n = 20000
	// One run of the three programs at rate; false (not last) when the
	// receiver missed frames that no counter of the guest's kernel has,
	// which a machine too slow for the rate loses in QEMU's hub.
	attempt := func(rate string, last bool) bool {
		t.Helper()
		rp, err := topo.Start(tp.Recv, path("xdprecv"), nil, "-i", out.B.Name, "-count", fmt.Sprint(n), "-quiet", "-duration", "300s")
		if err != nil {
			t.Fatal(err)
		}
		defer rp.Stop(5 * time.Second)
		if err := rp.WaitReady(context.Background(), 60*time.Second); err != nil {
			t.Fatalf("xdprecv: %v: %s", err, rp.Stderr())
		}
		fp, err := topo.Start(tp.Fwd, path("xdpfwd"), nil, "-i", in.B.Name, "-o", out.A.Name, "-quiet")
		if err != nil {
			t.Fatal(err)
		}
		defer fp.Stop(5 * time.Second)
		if err := fp.WaitReady(context.Background(), 60*time.Second); err != nil {
			t.Fatalf("xdpfwd: %v: %s", err, fp.Stderr())
		}
		for _, c := range []struct {
			p  *topo.Proc
			zc bool
		}{{rp, zcRecv}, {fp, zcFwd}} {
			if want := fmt.Sprintf("zero-copy %v,", c.zc); !strings.Contains(c.p.Output(), want) {
				t.Errorf("%s's ready line does not say %q (the probe's mode):\n%s", c.p.Name, want, c.p.Output())
			}
		}
		before := linkDrops(t, in.A, in.B, out.A, out.B)

		// n datagrams at rate: seconds, during which the pings go.
		gp, err := topo.Start(tp.Gen, path("xdpgen"), nil, "-i", in.A.Name, "-src", in.A.IPv4.Addr().String(),
			"-dst", out.B.IPv4.Addr().String(), "-dst-mac", in.B.MAC.String(), "-count", fmt.Sprint(n), "-rate", rate, "-quiet")
		if err != nil {
			t.Fatal(err)
		}
		defer gp.Stop(5 * time.Second)
		if err := gp.WaitReady(context.Background(), 60*time.Second); err != nil {
			t.Fatalf("xdpgen: %v: %s", err, gp.Stderr())
		}
		pingErr := tp.Gen.Ping(context.Background(), in.B.IPv4.Addr(), 3, 5*time.Second)
		select {
		case <-gp.Done():
			t.Errorf("xdpgen finished before the pings did: they did not check its queue's receive side while it ran")
		default:
		}
		if pingErr != nil {
			t.Errorf("ping through xdpgen's interface %s while it runs (zero-copy %v): %v", in.A.Name, zcGen, pingErr)
		}
		if err := gp.Wait(300 * time.Second); err != nil {
			t.Fatalf("xdpgen: %v: %s", err, gp.Stderr())
		}
		var gs zcSummary
		if err := cli.ParseSummary(gp.Output(), &gs); err != nil {
			t.Fatal(err)
		}
		select {
		case <-rp.Done():
		case <-time.After(10 * time.Second):
			rp.Stop(5 * time.Second)
		}
		<-rp.Done()
		var rs zcSummary
		if err := cli.ParseSummary(rp.Output(), &rs); err != nil {
			t.Fatalf("xdprecv: %v: %s", err, rp.Stderr())
		}
		if err := fp.Stop(10 * time.Second); err != nil {
			t.Errorf("xdpfwd: %v: %s", err, fp.Stderr())
		}
		var fs zcSummary
		if err := cli.ParseSummary(fp.Output(), &fs); err != nil {
			t.Fatalf("xdpfwd: %v: %s", err, fp.Stderr())
		}
		t.Logf("xdpgen: sent %d, completed %d, zero-copy %v; xdpfwd: forwarded %d, zero-copy %v; xdprecv: %d valid, %d late, zero-copy %v (ready line)",
			gs.Sent, gs.Completed, gs.ZeroCopy, fs.Forwarded, fs.ZeroCopy, rs.Valid, rs.Late, zcRecv)

		if gs.ZeroCopy != zcGen || fs.ZeroCopy != zcFwd {
			t.Errorf("zero-copy: xdpgen %v, xdpfwd %v; the probe said %v, %v", gs.ZeroCopy, fs.ZeroCopy, zcGen, zcFwd)
		}
		if gs.Sent != n || gs.Completed != n || gs.Frames != n || gs.NotCompleted != 0 || !gs.AccountingOK {
			t.Errorf("xdpgen: sent %d of %d, completed %d, frames %d, not completed %d, accounting %v", gs.Sent, n, gs.Completed, gs.Frames, gs.NotCompleted, gs.AccountingOK)
		}
		if rs.BadIPCsum+rs.BadUDPCsum+rs.BadPayload != 0 || !rs.AccountingOK || !fs.AccountingOK {
			t.Errorf("xdprecv: bad ip %d, udp %d, payload %d, accounting %v; xdpfwd accounting %v", rs.BadIPCsum, rs.BadUDPCsum, rs.BadPayload, rs.AccountingOK, fs.AccountingOK)
		}
		if fs.Forwarded < rs.Valid || rs.Valid > n {
			t.Errorf("xdpfwd forwarded %d, xdprecv got %d valid of %d", fs.Forwarded, rs.Valid, n)
		}
		drops := linkDrops(t, in.A, in.B, out.A, out.B) - before + rs.XDPDropped + fs.TXRingFull
		for _, x := range fs.XDP {
			drops += x.RXDropped + x.RXRingFull
		}
		if lost := uint64(n) - rs.Valid; lost > drops {
			if !last {
				t.Logf("at %s/s: %d of %d lost, only %d counted by the guest's kernel (QEMU's hub drops when a NIC's receive queue backs up): again slower", rate, lost, n, drops)
				return false
			}
			// On NIC pairs the wire between the guest's NICs is QEMU's
			// hub, which queues, reorders and drops outside any counter of
			// the guest's kernel (seen on 6.1 in copy mode, 0.3% at 1k/s
			// with the guest's CPUs busy running all three programs). A
			// loss beyond 1% is not the wire's.
			if uncounted := lost - drops; in.IsNIC() && uncounted*100 <= uint64(n) {
				t.Logf("%d of %d datagrams lost, %d of them counted by the guest's kernel: %d on the emulated wire (QEMU's hub), within its 1%%", lost, n, drops, uncounted)
				return true
			}
			t.Errorf("%d of %d datagrams lost, only %d dropped where the kernel counts drops", lost, n, drops)
		} else if lost > 0 {
			t.Logf("%d of %d lost, all counted by the kernel (%d drops)", lost, n, drops)
		}
		return true
	}
	for i, rate := range []string{"5k", "1k"} {
		if attempt(rate, i == 1) {
			return
		}
	}
}
