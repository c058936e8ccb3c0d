package rxpath

import (
	"encoding/binary"
	"testing"

	"github.com/xdpkit/xdpkit/internal/xdpprog"
)

// TestMetaRead: a record is read once (its magic cleared, so a frame
// that later comes without one shows none), only with the magic, and
// never from before the UMEM.
func TestMetaRead(t *testing.T) {
	mem := make([]byte, 4096)
	ne := binary.NativeEndian
	put := func(addr uint64, magic uint32) {
		r := mem[addr-xdpprog.MetaLen : addr]
		ne.PutUint64(r[0:], 111)
		ne.PutUint64(r[8:], 222)
		ne.PutUint32(r[16:], 333)
		ne.PutUint32(r[20:], uint32(HashL4|HashL3IPv4))
		ne.PutUint32(r[24:], xdpprog.MetaRXTimestamp|xdpprog.MetaRXHash|xdpprog.MetaXDPTime)
		ne.PutUint32(r[28:], magic)
	}
	var p Packet
	put(256, xdpprog.MetaMagic)
	p.meta.read(mem, 256)
	ts, ok1 := p.RXTimestamp()
	xt, ok2 := p.XDPTime()
	h, typ, ok3 := p.RXHash()
	if !ok1 || !ok2 || !ok3 || ts != 111 || xt != 222 || h != 333 || typ != HashL4|HashL3IPv4 {
		t.Fatalf("read: ts %d %v, xdp %d %v, hash %d %#x %v", ts, ok1, xt, ok2, h, typ, ok3)
	}
	p.meta.read(mem, 256) // the same frame again, no new record
	if _, ok := p.XDPTime(); ok {
		t.Error("a record was read twice")
	}
	put(512, xdpprog.MetaMagic^1)
	p.meta.read(mem, 512)
	if _, _, ok := p.RXHash(); ok {
		t.Error("a record without the magic was read")
	}
	p.meta.read(mem, 16) // no room before the address
	if _, ok := p.XDPTime(); ok {
		t.Error("a record read from before the UMEM")
	}
}
