package main

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/apps/internal/nexthop"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/rxpath"
)

// udpFrame builds an Ethernet + IPv4 + UDP frame with valid checksums.
func udpFrame(ttl uint8) []byte {
	b := make([]byte, 64)
	copy(b[0:6], []byte{2, 0, 0, 0, 0, 0xaa})
	copy(b[6:12], []byte{2, 0, 0, 0, 0, 0xbb})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 50)
	ip[8], ip[9] = ttl, 17
	copy(ip[12:], []byte{198, 18, 0, 1})
	copy(ip[16:], []byte{198, 18, 1, 2})
	binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
	udp := b[34:64]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], 30)
	ph := csum.PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), 17, 30)
	binary.BigEndian.PutUint16(udp[6:], csum.FinishUDP(csum.Sum(udp, ph)))
	return b
}

func testForwarder() *forwarder {
	f := &forwarder{l3: true, batch: 64}
	f.ports = []*port{{name: "in", ifindex: 1, mac: [6]byte{2, 0, 0, 0, 1, 1}}, {name: "out", ifindex: 2, mac: [6]byte{2, 0, 0, 0, 2, 2}}}
	f.cache = nexthop.NewCache()
	f.cache.Resolve = func(a netip.Addr) (nexthop.Hop, error) {
		return nexthop.Hop{LinkIndex: 2, Gateway: a, MAC: [6]byte{2, 0, 0, 0, 3, 3}}, nil
	}
	return f
}

func TestHandleL3(t *testing.T) {
	f := testForwarder()
	b := udpFrame(64)
	p := &rxpath.Packet{Data: b, Segments: [][]byte{b}, Len: len(b)}
	f.handle(p, f.ports[0])
	// (A Packet built here has no descriptors for Keep: pending counts
	// what handle queued; forwarded moves when a TX ring takes it.)
	if f.pending != 1 {
		t.Fatalf("not queued: %d pending, drops %d", f.pending, f.c.drops())
	}
	if b[22] != 63 {
		t.Errorf("TTL %d, want 63", b[22])
	}
	if csum.Fold(csum.Sum(b[14:34], 0)) != 0xffff {
		t.Error("IPv4 header checksum wrong after the TTL decrement")
	}
	if [6]byte(b[0:6]) != [6]byte{2, 0, 0, 0, 3, 3} || [6]byte(b[6:12]) != [6]byte{2, 0, 0, 0, 2, 2} {
		t.Errorf("MACs %x %x", b[0:6], b[6:12])
	}
	// TTL 1 must not be forwarded, and is counted.
	b = udpFrame(1)
	p = &rxpath.Packet{Data: b, Segments: [][]byte{b}, Len: len(b)}
	f.handle(p, f.ports[0])
	if f.pending != 1 || f.c.ttlExpired.Load() != 1 || b[22] != 1 {
		t.Errorf("TTL 1: %d pending, expired %d, TTL now %d", f.pending, f.c.ttlExpired.Load(), b[22])
	}
	// Multicast is never routed.
	b = udpFrame(64)
	copy(b[30:34], []byte{239, 1, 1, 1})
	p = &rxpath.Packet{Data: b, Segments: [][]byte{b}, Len: len(b)}
	f.handle(p, f.ports[0])
	if f.c.notRoutable.Load() != 1 {
		t.Error("multicast not counted as not routable")
	}
}

func BenchmarkHandleL3(b *testing.B) {
	f := testForwarder()
	frame := udpFrame(255)
	orig := append([]byte(nil), frame...)
	p := &rxpath.Packet{Data: frame, Segments: [][]byte{frame}, Len: len(frame)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i&127 == 0 {
			copy(frame, orig)
		}
		f.handle(p, f.ports[0])
	}
	if allocs := testing.AllocsPerRun(100, func() { copy(frame, orig); f.handle(p, f.ports[0]) }); allocs != 0 {
		b.Fatalf("%v allocs per packet", allocs)
	}
}
