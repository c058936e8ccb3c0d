package vethns_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// attachDrop attaches an XDP program that drops everything to ifname in
// ns: the sink for TX-only benchmarks.
func attachDrop(tb testing.TB, ns *vethns.NS, ifname string) {
	tb.Helper()
	var l link.Link
	err := ns.Do(func() error {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type:         ebpf.XDP,
			License:      "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1 /* XDP_DROP */), asm.Return()},
		})
		if err != nil {
			return err
		}
		defer prog.Close()
		idx, err := ifindex(ifname)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: idx, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
}

// txSocket is a TX-only AF_XDP socket whose frames all hold the same
// prebuilt UDP frame of size bytes.
type txSocket struct {
	u     *umem.UMEM
	s     *xsk.Socket
	size  int
	descs []xsk.Desc
	addrs []uint64
}

func newTXSocket(tb testing.TB, ns *vethns.NS, p *vethns.Pair, size int, budget uint32) *txSocket {
	tb.Helper()
	t := &txSocket{size: size, descs: make([]xsk.Desc, 64), addrs: make([]uint64, 64)}
	err := ns.Do(func() error {
		var err error
		t.u, err = umem.New(&umem.Config{FrameSize: 4096, FrameCount: 4096})
		if err != nil {
			return err
		}
		t.s, err = xsk.New(p.A.Name, 0, t.u, &xsk.Config{NoRX: true, MaxTXBudget: budget})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { t.s.Close(); t.u.Close() })
	pl := make([]byte, size-42)
	for i := uint32(0); i < t.u.FrameCount(); i++ {
		udpFrame(t.u.Frame(uint64(i)*4096), p.A.MAC, p.B.MAC, p.A.AddrPort4(4000), p.B.AddrPort4(9), pl)
	}
	return t
}

// send puts up to 64 frames on the TX ring, reaps completions and kicks;
// it returns how many it queued.
func (t *txSocket) send(max int) (int, error) {
	if c := t.s.Completion().Consume(t.addrs); c > 0 {
		if err := t.u.PutBatch(t.addrs[:c]); err != nil {
			return 0, err
		}
	}
	n := t.u.GetBatch(t.addrs[:min(max, 64)])
	for i := 0; i < n; i++ {
		t.descs[i] = xsk.Desc{Addr: t.addrs[i], Len: uint32(t.size)}
	}
	k := t.s.TX().Produce(t.descs[:n])
	if k < n {
		if err := t.u.PutBatch(t.addrs[k:n]); err != nil {
			return 0, err
		}
	}
	return k, t.s.KickTX()
}

// drain waits until every queued frame has completed.
func (t *txSocket) drain(tb testing.TB) {
	deadline := time.Now().Add(5 * time.Second)
	for t.u.Accounting().TX > 0 && time.Now().Before(deadline) {
		if _, err := t.send(0); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkXSKTX: TX-only on veth into a peer that drops in XDP. The
// same case against the C raw-syscall reference, counted at the peer, is
// the txonly rows of `make bench` (bench/out/summary.md).
func BenchmarkXSKTX(b *testing.B) {
	vethns.Require(b)
	for _, size := range []int{64, 1500} {
		for _, budget := range []uint32{0, 256} {
			b.Run(fmt.Sprintf("%d/budget=%d", size, budget), func(b *testing.B) {
				a, peer := vethns.NewNS(b), vethns.NewNS(b)
				p := vethns.NewPair(b, a, peer, nil)
				attachDrop(b, peer, p.B.Name)
				t := newTXSocket(b, a, p, size, budget)
				b.ReportAllocs()
				b.ResetTimer()
				for sent := 0; sent < b.N; {
					k, err := t.send(b.N - sent)
					if err != nil {
						b.Fatal(err)
					}
					sent += k
				}
				t.drain(b)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
				b.ReportMetric(float64(t.s.Counters().KicksTX)/float64(b.N), "syscalls/frame")
			})
		}
	}
}

// BenchmarkXSKRX: RX on veth, fed flat out by an AF_XDP sender in the
// peer namespace; frames go back to the Fill ring at once (rxdrop). The
// same case against the C reference is the rxdrop rows of `make bench`
// (bench/out/summary.md).
func BenchmarkXSKRX(b *testing.B) {
	vethns.Require(b)
	b.Run("64", func(b *testing.B) {
		a, peer := vethns.NewNS(b), vethns.NewNS(b)
		p := vethns.NewPair(b, peer, a, nil) // the sender owns end A
		tx := newTXSocket(b, peer, p, 64, 256)
		rx := newRX(b, a, p.B.Name, 1, nil)
		sock := rx.socks[0]

		ctx, cancel := context.WithCancel(context.Background())
		var sent atomic.Int64
		done := make(chan error, 1)
		go func() {
			var err error
			for ctx.Err() == nil && err == nil {
				var k int
				k, err = tx.send(64)
				sent.Add(int64(k))
			}
			done <- err
		}()
		descs := make([]xsk.Desc, 64)
		addrs := make([]uint64, 64)
		b.ReportAllocs()
		b.ResetTimer()
		deadline := time.Now().Add(time.Minute)
		for got := 0; got < b.N; {
			k := sock.RX().Consume(descs)
			if k == 0 {
				if time.Now().After(deadline) {
					b.Fatalf("received %d of %d", got, b.N)
				}
				_ = sock.KickRX()
				continue
			}
			for i, d := range descs[:k] {
				addrs[i] = d.Addr
			}
			sock.Fill().Produce(addrs[:k])
			got += k
		}
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		tx.drain(b)
		st, _ := sock.Stats()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
		b.ReportMetric(float64(sock.Counters().KicksRX)/float64(b.N), "syscalls/frame")
		b.ReportMetric(float64(st.RXDropped+st.RXRingFull+st.RXFillRingEmptyDesc), "drops")
	})
}

func ifindex(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}
