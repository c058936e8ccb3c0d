package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestForwardRecycle: xdpfwd (l2, one queue, rings of 64) runs in fwd-ns
// and forwards a bounded number of UDP datagrams from gen-ns to a socket
// in recv-ns, sent in windows that wait for the receiver. The fwd-ns
// kernel does not forward, so what the socket gets went through xdpfwd.
// While the poller runs, every TX completion goes back to its Fill ring
// through rxpath.Poller.Recycle: Recycle refuses no batch, and only the
// completions reaped after the poller stopped go to the allocator, at
// most the frames that can be in flight then (a TX ring and a Completion
// ring: the kernel takes a TX descriptor only when it has a Completion
// slot for it). At the end every UMEM frame is back.
func TestForwardRecycle(t *testing.T) {
	vethns.Require(t)
	tp, err := topo.Create(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Error(err)
		}
	})
	err = tp.Fwd.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}

	const port = 9000
	const marker = "xdpfwd-recycle:"
	rc, err := tp.Recv.ListenUDP(tp.Out.B.AddrPort4(port))
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		buf := make([]byte, 2048)
		for {
			n, err := rc.Read(buf)
			if err != nil {
				return // closed
			}
			if n >= len(marker) && string(buf[:len(marker)]) == marker {
				got.Add(1)
			}
		}
	}()
	defer func() { rc.Close(); <-rdone }()
	sc, err := tp.Gen.DialUDP(netip.AddrPort{}, tp.Out.B.AddrPort4(port))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sent := 0
	send := func() {
		t.Helper()
		if _, err := fmt.Fprintf(sc, "%s%08d", marker, sent); err != nil {
			t.Fatalf("send: %v", err)
		}
		sent++
	}

	const ring = 64
	c := &config{in: tp.In.B.Name, out: tp.Out.A.Name, mode: "l2",
		dstMAC: tp.Out.B.MAC.String(), dstMACVal: [6]byte(tp.Out.B.MAC),
		queues: []int{0}, frames: 8 * ring, ring: ring, batch: 16, xdpMode: "auto", quiet: true}
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		sum *Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		err := tp.Fwd.Do(func() error {
			r.sum, r.err = run(ctx, c)
			return nil
		})
		r.err = errors.Join(r.err, err)
		done <- r
	}()
	var res result
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case res = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("xdpfwd did not stop within 30 s of its cancellation")
		}
	}
	defer stop()

	// Wait for xdpfwd: a datagram every 10 ms until one arrives.
	deadline := time.Now().Add(20 * time.Second)
	for got.Load() == 0 {
		select {
		case r := <-done:
			stopped = true
			t.Fatalf("xdpfwd stopped before forwarding: %v", r.err)
		default:
		}
		if time.Now().After(deadline) || sent >= 2000 {
			t.Fatalf("nothing forwarded in 20 s (%d datagrams sent)", sent)
		}
		send()
		time.Sleep(10 * time.Millisecond)
	}

	// Then n in windows: each waits (up to 2 s) until the receiver has
	// all but what earlier windows lost.
	const n, window = 4000, 32
	deadline = time.Now().Add(60 * time.Second)
	lost := 0
	for i := 0; i < n && time.Now().Before(deadline); i += window {
		for range window {
			send()
		}
		wait := time.Now().Add(2 * time.Second)
		for int(got.Load()) < sent-lost && time.Now().Before(wait) {
			time.Sleep(200 * time.Microsecond)
		}
		lost = max(lost, sent-int(got.Load()))
	}
	wait := time.Now().Add(2 * time.Second)
	for int(got.Load()) < sent && time.Now().Before(wait) {
		time.Sleep(time.Millisecond)
	}
	stop()
	received := int(got.Load())
	if res.err != nil {
		t.Fatalf("xdpfwd: %v", res.err)
	}
	s := res.sum
	t.Logf("sent %d, received %d; xdpfwd: received %d, forwarded %d, completed %d, recycled %d, recycle errors %d, drops: tx full %d, XDP %+v; %s",
		sent, received, s.Received, s.Forwarded, s.Completed, s.Recycled, s.RecycleErrors, s.TXRingFull, s.XDP, s.Poller)

	// (a) The receiver got them, through xdpfwd.
	if received < sent/2 || uint64(received) > s.Forwarded {
		t.Errorf("recv-ns got %d of %d datagrams, xdpfwd forwarded %d: want at least half, and no more than forwarded",
			received, sent, s.Forwarded)
	}
	// (b) Recycle refused nothing.
	if s.RecycleErrors != 0 {
		t.Errorf("Recycle refused %d completion batches", s.RecycleErrors)
	}
	// (c) The completions went back through Recycle, all but what was in
	// flight when the poller stopped.
	if s.Completed > s.Forwarded || s.Recycled > s.Completed || s.Recycled+2*ring < s.Completed || s.Recycled == 0 {
		t.Errorf("forwarded %d, completed %d, recycled %d: want every completion recycled but at most %d (a TX and a Completion ring), and some",
			s.Forwarded, s.Completed, s.Recycled, 2*ring)
	}
	if s.Completed+2*ring < uint64(received) {
		t.Errorf("completed %d, received %d: more than %d frames not completed", s.Completed, received, 2*ring)
	}
	// (d) Every frame back.
	if !s.AccountingOK {
		t.Errorf("UMEM accounting: %s", s.Accounting)
	}
}
