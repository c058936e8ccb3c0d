package txpath

import (
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// fakePort is a TX ring and completion ring with no device behind them:
// a kick "transmits" every pending descriptor at once (handing its bytes
// to onPacket, if set) and completes its frames. It keeps the UMEM
// accounting as package xsk does.
type fakePort struct {
	u        *umem.UMEM
	size     int
	ring     []xsk.Desc // produced, not yet taken by a kick
	comp     []uint64
	compCap  int
	hold     bool // kick takes nothing (a stalled device)
	kicks    int
	onPacket func(descs []xsk.Desc)
	pkt      []xsk.Desc
	// quietFull: a kick that stops at a full completion ring reports
	// success, not "again", as copy mode did before it answered EAGAIN
	// there.
	quietFull bool
}

func newFakePort(u *umem.UMEM, size int) *fakePort {
	return &fakePort{u: u, size: size, compCap: size}
}

func (p *fakePort) produce(d []xsk.Desc) int {
	n := min(len(d), p.size-len(p.ring))
	if n < len(d) {
		for n > 0 && d[n-1].Options&xsk.OptContd != 0 {
			n--
		}
	}
	p.ring = append(p.ring, d[:n]...)
	p.u.Moved(umem.Held, umem.TX, n)
	return n
}

func (p *fakePort) txFree() int    { return p.size - len(p.ring) }
func (p *fakePort) txPending() int { return len(p.ring) }

func (p *fakePort) consume(addrs []uint64) int {
	n := copy(addrs, p.comp)
	p.comp = p.comp[:copy(p.comp, p.comp[n:])]
	p.u.Moved(umem.TX, umem.Held, n)
	return n
}

func (p *fakePort) closed() bool { return false }

func (p *fakePort) kick() (bool, error) {
	p.kicks++
	if p.hold {
		return false, nil
	}
	n := min(len(p.ring), p.compCap-len(p.comp))
	for _, d := range p.ring[:n] {
		if p.onPacket != nil {
			p.pkt = append(p.pkt, d)
			if d.Options&xsk.OptContd == 0 {
				p.onPacket(p.pkt)
				p.pkt = p.pkt[:0]
			}
		}
		p.comp = append(p.comp, d.Addr) // as the kernel does: the descriptor address
	}
	p.ring = p.ring[:copy(p.ring, p.ring[n:])]
	if p.quietFull && len(p.comp) == p.compCap {
		return false, nil
	}
	return len(p.ring) > 0, nil
}
