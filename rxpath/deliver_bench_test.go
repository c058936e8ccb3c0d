package rxpath

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// owner is a handler that wants to own every packet's bytes after Receive
// returns, the case the copy threshold decides: small packets are copied
// into its buffers (Copier), large ones kept and given back to the UMEM
// allocator, whose frames the refill then takes again. It reads every byte.
type owner struct {
	u     *umem.UMEM
	bufs  [][]byte
	next  int
	descs []xsk.Desc
	sum   uint32
	keep  bool
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
			if err := o.u.Put(d.Addr); err != nil {
				panic(err)
			}
		}
	}
}

// inPlace reads the packet where it is and lets it go.
type inPlace struct{ sum uint32 }

func (h *inPlace) Receive(p *Packet) { h.sum = csum.Sum(p.Data, h.sum) }

// BenchmarkDeliver measures the poller's per-packet delivery (validation,
// copy or lend, handler, recycle; not the rings) for:
//
//	copy: copied into the handler's buffer, frame recycled at once
//	keep: lent, kept by the handler and given back to the allocator,
//	      taken from the allocator again by the next refill
//	lend: lent, read in place, recycled when the handler returns
//
// "copy" against "keep" sets DefaultCopyThreshold.
func BenchmarkDeliver(b *testing.B) {
	u, err := umem.New(&umem.Config{FrameCount: 256})
	if err != nil {
		b.Skipf("no UMEM here: %v", err)
	}
	defer u.Close()
	for _, size := range []int{64, 256, 512, 1024, 1500} {
		for _, mode := range []string{"copy", "keep", "lend"} {
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
	defer func() {
		if err := u.PutBatch(addrs); err != nil {
			b.Fatal(err)
		}
	}()
	pl := &pool{u: u, mem: u.Bytes(), size: u.Size(), fsize: u.FrameSize(),
		shift: uint(bits.TrailingZeros32(u.FrameSize())), lent: make([]uint64, (u.FrameCount()+63)/64)}
	s := &sock{pool: pl, stash: make([]uint64, 0, frames)}
	p := &Poller{copyMax: -1}
	o := &owner{u: u, keep: mode == "keep", descs: make([]xsk.Desc, 0, MaxSegments)}
	for range 256 {
		o.bufs = append(o.bufs, make([]byte, 2048))
	}
	switch mode {
	case "copy":
		p.copyMax = 1 << 16
		p.h, p.copier = o, o
	case "keep":
		p.h = o
	case "lend":
		p.h = &inPlace{}
	}
	descs := make([]xsk.Desc, frames)
	for i, a := range addrs {
		descs[i] = xsk.Desc{Addr: a + 256, Len: uint32(size)}
		for j := range size {
			pl.mem[a+256+uint64(j)] = byte(i + j)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % frames
		if k == 0 {
			if o.keep && i > 0 {
				// The refill takes the kept frames back from the allocator.
				if n := u.GetBatch(addrs); n != frames {
					b.Fatalf("got %d of %d frames back", n, frames)
				}
				for j, a := range addrs {
					descs[j].Addr = a + 256
				}
			}
			s.stash = s.stash[:0]
		}
		pl.give(addrs[k])
		p.deliver(s, descs[k:k+1])
	}
	b.StopTimer()
	if o.keep && b.N > 0 {
		n := b.N % frames
		if n == 0 {
			n = frames
		}
		if got := u.GetBatch(addrs[:n]); got != n {
			b.Fatalf("got %d of %d frames back", got, n)
		}
	}
}
