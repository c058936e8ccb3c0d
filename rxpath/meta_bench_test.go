package rxpath

import (
	"encoding/binary"
	"testing"

	"github.com/xdpkit/xdpkit/internal/xdpprog"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// metaReader reads every packet's metadata, as a latency meter does.
type metaReader struct{ sum int64 }

func (h *metaReader) Receive(p *Packet) {
	if ts, ok := p.XDPTime(); ok {
		h.sum += ts
	}
	if v, _, ok := p.RXHash(); ok {
		h.sum += int64(v)
	}
}

// BenchmarkDeliverMetadata: a lent 64-byte packet through deliver, with
// and without Config.Metadata (the record in front of each frame written
// as the XDP program would), to a handler that reads the metadata. Both
// must allocate nothing; "off" is what every Poller pays that does not
// ask for metadata.
func BenchmarkDeliverMetadata(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) { benchDeliverMeta(b, on) })
	}
}

func benchDeliverMeta(b *testing.B, on bool) {
	u, err := umem.New(&umem.Config{FrameCount: 64})
	if err != nil {
		b.Skipf("no UMEM here: %v", err)
	}
	defer u.Close()
	const frames = 64
	addrs := make([]uint64, frames)
	if n := u.GetBatch(addrs); n != frames {
		b.Fatalf("got %d frames", n)
	}
	pl := newPool(u)
	s := &sock{pool: pl, stash: make([]uint64, 0, 2*frames), base: ^uint64(u.FrameSize() - 1)}
	h := &metaReader{}
	p := &Poller{copyMax: -1, h: h, cfg: Config{Metadata: on}}
	descs := make([]xsk.Desc, frames)
	ne := binary.NativeEndian
	for i, a := range addrs {
		descs[i] = xsk.Desc{Addr: a + 256, Len: 64}
		r := pl.mem[a+256-xdpprog.MetaLen : a+256]
		ne.PutUint64(r[8:], 1)
		ne.PutUint32(r[16:], 0x1234)
		ne.PutUint32(r[24:], xdpprog.MetaXDPTime|xdpprog.MetaRXHash)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := i % frames
		if k == 0 {
			s.stash = s.stash[:0]
		}
		a := descs[k].Addr
		ne.PutUint32(pl.mem[a-4:], xdpprog.MetaMagic) // the program writes it for every packet
		pl.give(a)
		p.deliver(s, descs[k:k+1])
	}
	if on && h.sum == 0 {
		b.Fatal("no metadata read")
	}
	if !on && h.sum != 0 {
		b.Fatal("metadata read without Config.Metadata")
	}
	if err := u.PutBatch(addrs); err != nil {
		b.Fatal(err)
	}
}
