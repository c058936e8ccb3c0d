package main

import (
	"os"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

func TestMain(m *testing.M) {
	vethns.Exclusive()
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

// TestFlushTXFull: a flush with more forwarded packets and more ICMP
// errors pending than the TX ring can take in its two tries (one kick
// loop in between) counts what the ring refused apart: forwarded packets
// in txFull, ICMP errors in icmpTXFull. Each kind adds up to what was
// pending, so forwarded never takes the refused ICMP errors off (which
// wrapped it below zero), and every frame comes back to the UMEM.
func TestFlushTXFull(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	pair := vethns.NewPair(t, a, b, nil)
	const ring = 64
	const nFwd, nICMP = 3 * ring, 3 * ring // more than two ring's worth each
	err := a.Do(func() error {
		f, q, closeAll, err := txOnlyForwarder(pair.A.Name, 4*(nFwd+nICMP), ring, 4*ring)
		if err != nil {
			return err
		}
		defer closeAll()
		u := f.u
		frame := udpFrame(64)
		addrs := make([]uint64, nFwd+nICMP)
		if got := u.GetBatch(addrs); got != len(addrs) {
			t.Fatalf("UMEM gave %d frames of %d", got, len(addrs))
		}
		for i, addr := range addrs {
			copy(u.Frame(addr), frame)
			d := xsk.Desc{Addr: addr, Len: uint32(len(frame))}
			if i < nFwd {
				q.pend = append(q.pend, d)
			} else {
				q.icmp = append(q.icmp, d)
			}
			f.pending++
		}
		f.flush()
		f.finish()
		fwd, txFull := f.c.forwarded.Load(), f.c.txFull.Load()
		icmp, icmpFull := f.c.icmpSent.Load(), f.c.icmpTXFull.Load()
		t.Logf("forwarded %d, tx full %d; ICMP sent %d, tx full %d; in flight %d", fwd, txFull, icmp, icmpFull, q.inflight)
		if fwd+txFull != nFwd || icmp+icmpFull != nICMP {
			t.Errorf("forwarded %d + tx full %d, want %d; ICMP sent %d + tx full %d, want %d",
				fwd, txFull, nFwd, icmp, icmpFull, nICMP)
		}
		if txFull == 0 || icmpFull == 0 {
			t.Errorf("the TX ring of %d refused nothing (forwarded %d, ICMP %d): the test did not test", ring, txFull, icmpFull)
		}
		if f.c.bytes.Load() != fwd*uint64(len(frame)) {
			t.Errorf("bytes %d, want %d", f.c.bytes.Load(), fwd*uint64(len(frame)))
		}
		if len(q.pend) != 0 || len(q.icmp) != 0 || f.pending != 0 {
			t.Errorf("after flush: %d + %d descriptors pending (%d)", len(q.pend), len(q.icmp), f.pending)
		}
		if q.inflight != 0 {
			t.Errorf("%d frames still in flight after finish", q.inflight)
		}
		if acc := u.Accounting(); acc.Free != acc.Total {
			t.Errorf("UMEM: not every frame back: %s", acc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEndRoundDefers: a round that took packets and leaves fewer than
// kickBatch pending keeps them (nothing on the TX ring, no kick), but
// only once: the next round sends them, whether it took packets or not;
// a round that leaves kickBatch sends at once. Every frame comes back.
func TestEndRoundDefers(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	pair := vethns.NewPair(t, a, b, nil)
	err := a.Do(func() error {
		f, q, closeAll, err := txOnlyForwarder(pair.A.Name, 256, 128, 128)
		if err != nil {
			return err
		}
		defer closeAll()
		u := f.u
		frame := udpFrame(64)
		add := func(n int) {
			t.Helper()
			addrs := make([]uint64, n)
			if got := u.GetBatch(addrs); got != n {
				t.Fatalf("UMEM gave %d frames of %d", got, n)
			}
			for _, addr := range addrs {
				copy(u.Frame(addr), frame)
				q.pend = append(q.pend, xsk.Desc{Addr: addr, Len: uint32(len(frame))})
				f.pending++
			}
		}
		const few = kickBatch / 3
		add(few)
		f.roundGot = true // Receive ran in this round
		f.EndRound()
		if len(q.pend) != few || f.pending != few || q.inflight != 0 || q.sock.TX().Pending() != 0 {
			t.Errorf("a busy round with %d pending sent some: %d kept (%d counted), %d in flight, %d on the TX ring",
				few, len(q.pend), f.pending, q.inflight, q.sock.TX().Pending())
		}
		add(few)
		f.roundGot = true // a busy round after one that kept its packets
		f.EndRound()
		if len(q.pend) != 0 || f.pending != 0 || f.c.forwarded.Load() != 2*few {
			t.Errorf("a busy round after a deferring one kept %d (%d counted), forwarded %d; want 0 kept, %d forwarded",
				len(q.pend), f.pending, f.c.forwarded.Load(), 2*few)
		}
		add(few)
		f.roundGot = true
		f.EndRound()
		if len(q.pend) != few {
			t.Errorf("a busy round after one that sent kept %d of %d; want all kept", len(q.pend), few)
		}
		f.EndRound() // an empty round
		if len(q.pend) != 0 || f.pending != 0 || f.c.forwarded.Load() != 3*few {
			t.Errorf("an empty round kept %d (%d counted), forwarded %d; want 0 kept, %d forwarded",
				len(q.pend), f.pending, f.c.forwarded.Load(), 3*few)
		}
		add(kickBatch)
		f.roundGot = true
		f.EndRound()
		if len(q.pend) != 0 || f.c.forwarded.Load() != 3*few+kickBatch {
			t.Errorf("a busy round with %d pending kept %d, forwarded %d in all; want 0 kept, %d forwarded",
				kickBatch, len(q.pend), f.c.forwarded.Load(), 3*few+kickBatch)
		}
		f.finish()
		if acc := u.Accounting(); acc.Free != acc.Total {
			t.Errorf("UMEM: not every frame back: %s", acc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// txOnlyForwarder is a forwarder with one port on ifname: a TX-only
// copy-mode socket (TX and Fill rings of txSize, Completion ring of
// compSize) on a UMEM of frames 2048-byte frames. closeAll closes the
// socket, then the UMEM.
func txOnlyForwarder(ifname string, frames, txSize, compSize uint32) (f *forwarder, q *port, closeAll func(), err error) {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: frames})
	if err != nil {
		return nil, nil, nil, err
	}
	sock, err := xsk.New(ifname, 0, u, &xsk.Config{NoRX: true, TXSize: txSize, FillSize: txSize,
		CompletionSize: compSize, Mode: xsk.ModeCopy})
	if err != nil {
		u.Close()
		return nil, nil, nil, err
	}
	q = &port{name: ifname, sock: sock, comp: make([]uint64, 256)}
	f = &forwarder{u: u, ports: []*port{q}, batch: 64}
	return f, q, func() { sock.Close(); u.Close() }, nil
}
