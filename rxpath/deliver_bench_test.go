package rxpath

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// owner is a handler that wants to own every packet's bytes after Receive
// returns, the case the copy threshold decides: small packets are copied
// into its buffers (Copier), large ones kept (Packet.Keep) and handed back
// to the UMEM allocator once per batch with one PutBatch, as a forwarder
// hands back its completions (or, with putEach, one Put per frame). It
// reads every byte.
type owner struct {
	u       *umem.UMEM
	bufs    [][]byte
	next    int
	descs   []xsk.Desc
	kept    []uint64
	sum     uint32
	keep    bool
	putEach bool
}

func (o *owner) CopyBuffer(n int) []byte {
	b := o.bufs[o.next]
	o.next = (o.next + 1) % len(o.bufs)
	return b[:n]
}

func (o *owner) Receive(p *Packet) {
	o.sum = csum.Sum(p.Data, o.sum)
	if o.keep && !p.Copied() {
		o.descs = p.Keep(o.descs[:0])
		for _, d := range o.descs {
			if o.putEach {
				if err := o.u.Put(d.Addr); err != nil {
					panic(err)
				}
				continue
			}
			o.kept = append(o.kept, d.Addr)
		}
	}
}

// release hands the kept frames back to the allocator in one batch.
func (o *owner) release() {
	if len(o.kept) > 0 {
		if err := o.u.PutBatch(o.kept); err != nil {
			panic(err)
		}
		o.kept = o.kept[:0]
	}
}

// inPlace reads the packet where it is and lets it go.
type inPlace struct{ sum uint32 }

func (h *inPlace) Receive(p *Packet) { h.sum = csum.Sum(p.Data, h.sum) }

// fillModel stands in for a Fill ring's producer side: the addresses
// written into a ring of slots and one atomic store of the producer index
// per batch, as xsk.FillRing.Produce does (the kernel's side is not
// measured). Every mode pays it for every frame.
type fillModel struct {
	slots []uint64
	prod  atomic.Uint32
	mask  uint32
}

func (f *fillModel) produce(addrs []uint64) {
	p := f.prod.Load()
	for i, a := range addrs {
		f.slots[(p+uint32(i))&f.mask] = a
	}
	f.prod.Store(p + uint32(len(addrs)))
}

// BenchmarkDeliver measures the poller's per-packet delivery and the
// frame's way back to the Fill ring, for:
//
//	copy: copied into the handler's buffer; the frame goes from the
//	      poller's stash to the Fill ring
//	keep: lent and kept by the handler, which hands its frames back to the
//	      allocator with one PutBatch per batch of 64; the refill takes
//	      them from the allocator (GetBatch) to the Fill ring
//	keep1: keep, but the handler gives each frame back with its own Put
//	lend: lent, read in place, recycled when the handler returns
//
// Every mode ends each batch of 64 packets the same way, as a poll round
// does: the frames go onto the Fill ring (fillModel). "copy" against
// "keep" sets DefaultCopyThreshold: the largest size where copy is not
// slower.
func BenchmarkDeliver(b *testing.B) {
	u, err := umem.New(&umem.Config{FrameCount: 256})
	if err != nil {
		b.Skipf("no UMEM here: %v", err)
	}
	defer u.Close()
	for _, size := range []int{64, 128, 256, 512, 1024, 1500} {
		for _, mode := range []string{"copy", "keep", "keep1", "lend"} {
			b.Run(fmt.Sprintf("%s/%d", mode, size), func(b *testing.B) {
				benchDeliver(b, u, mode, size)
			})
		}
	}
}

func benchDeliver(b *testing.B, u *umem.UMEM, mode string, size int) {
	const frames = 64
	addrs := make([]uint64, frames)
	if n := u.GetBatch(addrs); n != frames {
		b.Fatalf("got %d frames", n)
	}
	keep := mode == "keep" || mode == "keep1"
	defer func() {
		// Every frame of addrs is ours again after the last endBatch.
		if err := u.PutBatch(addrs); err != nil {
			b.Fatal(err)
		}
	}()
	pl := newPool(u)
	s := &sock{pool: pl, stash: make([]uint64, 0, frames), base: ^uint64(u.FrameSize() - 1)}
	p := &Poller{copyMax: -1}
	o := &owner{u: u, keep: keep, putEach: mode == "keep1", descs: make([]xsk.Desc, 0, MaxSegments),
		kept: make([]uint64, 0, frames)}
	for range 256 {
		o.bufs = append(o.bufs, make([]byte, 2048))
	}
	switch mode {
	case "copy":
		p.copyMax = 1 << 16
		p.h, p.copier = o, o
	case "keep", "keep1":
		p.h = o
	case "lend":
		p.h = &inPlace{}
	}
	fill := &fillModel{slots: make([]uint64, 2048), mask: 2047}
	descs := make([]xsk.Desc, frames)
	for i, a := range addrs {
		descs[i] = xsk.Desc{Addr: a + 256, Len: uint32(size)}
		for j := range size {
			pl.mem[a+256+uint64(j)] = byte(i + j)
		}
	}
	// endBatch is the end of a poll round: the n frames of the batch go
	// back onto the Fill ring.
	endBatch := func(n int) {
		if keep {
			o.release()
			// The refill takes the kept frames back from the allocator.
			if got := u.GetBatch(addrs[:n]); got != n {
				b.Fatalf("got %d of %d frames back", got, n)
			}
			for j, a := range addrs[:n] {
				descs[j].Addr = a + 256
			}
			fill.produce(addrs[:n])
			return
		}
		fill.produce(s.stash)
		s.stash = s.stash[:0]
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % frames
		if k == 0 && i > 0 {
			endBatch(frames)
		}
		pl.give(addrs[k])
		p.deliver(s, descs[k:k+1])
	}
	if b.N > 0 {
		endBatch((b.N-1)%frames + 1)
	}
	b.StopTimer()
}
