package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/apps/internal/nexthop"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
)

// udpFrame builds a 64-byte Ethernet + IPv4 + UDP frame with valid
// checksums.
func udpFrame(ttl uint8) []byte { return udpFrameSize(ttl, 64) }

// udpFrameSize is udpFrame of size bytes.
func udpFrameSize(ttl uint8, size int) []byte {
	b := make([]byte, size)
	copy(b[0:6], []byte{2, 0, 0, 0, 0, 0xaa})
	copy(b[6:12], []byte{2, 0, 0, 0, 0, 0xbb})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8], ip[9] = ttl, 17
	copy(ip[12:], []byte{198, 18, 0, 1})
	copy(ip[16:], []byte{198, 18, 1, 2})
	binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
	udp := b[34:]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	for i := 8; i < len(udp); i++ {
		udp[i] = byte(i)
	}
	ph := csum.PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), 17, uint16(len(udp)))
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

func BenchmarkHandleL3(b *testing.B) { benchmarkHandle(b, false, 64) }

// BenchmarkHandleL3Software: from a software device, whose senders'
// partial checksums the forwarder finishes (hot cache: the payload of a
// received packet would come from another CPU's cache).
func BenchmarkHandleL3Software(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprint(size), func(b *testing.B) { benchmarkHandle(b, true, size) })
	}
}

func benchmarkHandle(b *testing.B, software bool, size int) {
	f := testForwarder()
	f.ports[0].software = software
	frame := udpFrameSize(255, size)
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

// udp6Frame builds an Ethernet + IPv6 + UDP frame with a valid checksum.
func udp6Frame() []byte {
	b := make([]byte, 14+40+8+22)
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], 30)
	ip[6], ip[7] = 17, 64
	src, dst := netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8:1::2").As16()
	copy(ip[8:], src[:])
	copy(ip[24:], dst[:])
	udp := ip[40:]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], 30)
	for i := 8; i < 30; i++ {
		udp[i] = byte(i * 7)
	}
	ph := csum.PseudoHeaderIPv6(src, dst, 17, 30)
	binary.BigEndian.PutUint16(udp[6:], csum.FinishUDP(csum.Sum(udp[:30], ph)))
	return b
}

// TestFinishPartial: only a checksum field that holds the pseudo-header
// sum is finished (IPv4 and IPv6); a finished checksum, a wrong one and a
// zero UDP field (IPv4: none) are left as they are. Then, for many field
// values, finishPartial (which sums the payload only when the field can
// be partial) finishes exactly what csum.VerifyTransport calls Partial.
func TestFinishPartial(t *testing.T) {
	pseudo := func(b []byte) uint16 {
		var fr pkt.Frame
		if err := pkt.Parse(b, &fr); err != nil {
			t.Fatal(err)
		}
		n := uint16(fr.L3 + fr.IPLen - fr.L4)
		if fr.EtherType == pkt.EtherTypeIPv4 {
			return csum.Fold(csum.PseudoHeaderIPv4(fr.Src.As4(), fr.Dst.As4(), fr.Proto, n))
		}
		return csum.Fold(csum.PseudoHeaderIPv6(fr.Src.As16(), fr.Dst.As16(), fr.Proto, uint32(n)))
	}
	for _, tc := range []struct {
		name   string
		frame  func() []byte
		field  func(b []byte) uint16 // the UDP checksum field to send; nil: as built
		finish bool
	}{
		{"ipv4 finished", func() []byte { return udpFrame(64) }, nil, false},
		{"ipv4 partial", func() []byte { return udpFrame(64) }, pseudo, true},
		{"ipv4 wrong", func() []byte { return udpFrame(64) }, func(b []byte) uint16 { return pseudo(b) + 1 }, false},
		{"ipv4 none", func() []byte { return udpFrame(64) }, func([]byte) uint16 { return 0 }, false},
		{"ipv6 finished", udp6Frame, nil, false},
		{"ipv6 partial", udp6Frame, pseudo, true},
		{"ipv6 wrong", udp6Frame, func(b []byte) uint16 { return pseudo(b) ^ 0x100 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testForwarder()
			b := tc.frame()
			if err := pkt.Parse(b, &f.fr); err != nil {
				t.Fatal(err)
			}
			field := f.fr.L4 + 6
			if tc.field != nil {
				binary.BigEndian.PutUint16(b[field:], tc.field(b))
			}
			before := append([]byte(nil), b...)
			f.finishPartial(b[f.fr.L3 : f.fr.L3+f.fr.IPLen])
			finished := f.c.partialFinished.Load() == 1
			if finished != tc.finish {
				t.Fatalf("finished %v, want %v", finished, tc.finish)
			}
			if !tc.finish {
				if string(b) != string(before) {
					t.Errorf("frame changed: % x -> % x", before[field:field+2], b[field:field+2])
				}
				return
			}
			if v, err := csum.VerifyFrame(b); err != nil || v != csum.Good {
				t.Errorf("after finishing: %v, %v", v, err)
			}
		})
	}
	for _, frame := range []func() []byte{func() []byte { return udpFrame(64) }, udp6Frame} {
		b0 := frame()
		p := pseudo(b0)
		values := []uint16{0, 0xffff, p, ^p, p + 1, p - 1}
		for v := uint32(0); v < 1<<16; v += 257 {
			values = append(values, uint16(v))
		}
		for _, v := range values {
			f := testForwarder()
			b := append([]byte(nil), b0...)
			if err := pkt.Parse(b, &f.fr); err != nil {
				t.Fatal(err)
			}
			binary.BigEndian.PutUint16(b[f.fr.L4+6:], v)
			ip := b[f.fr.L3 : f.fr.L3+f.fr.IPLen]
			verdict, err := csum.VerifyTransport(ip)
			f.finishPartial(ip)
			if finished := f.c.partialFinished.Load() == 1; finished != (err == nil && verdict == csum.Partial) {
				t.Errorf("%v, field %#04x: finished %v, VerifyTransport says %v (%v)", f.fr.EtherType, v, finished, verdict, err)
			}
			// The complement of the pseudo-header sum is a wrong
			// checksum, not a partial one (0 and 0xFFFF aside).
			if v == ^p && p != 0 && p != 0xffff && f.c.partialFinished.Load() != 0 {
				t.Errorf("%v, field %#04x = ^pseudo: finished as partial", f.fr.EtherType, v)
			}
		}
	}
}
