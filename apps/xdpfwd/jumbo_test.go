package main

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
)

// jumbo builds an Ethernet + IPv4 or IPv6 + UDP frame of n bytes and
// splits it into buffers of at most seg bytes, as a multi-buffer packet.
func jumbo(v6 bool, n, seg int) *rxpath.Packet {
	b := make([]byte, n)
	l4 := 34
	if v6 {
		binary.BigEndian.PutUint16(b[12:], pkt.EtherTypeIPv6)
		ip := b[14:]
		ip[0], ip[6], ip[7] = 0x60, pkt.ProtoUDP, 9
		binary.BigEndian.PutUint16(ip[4:], uint16(n-14-40))
		a, d := netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8:1::2").As16()
		copy(ip[8:], a[:])
		copy(ip[24:], d[:])
		l4 = 54
	} else {
		binary.BigEndian.PutUint16(b[12:], pkt.EtherTypeIPv4)
		ip := b[14:]
		ip[0], ip[8], ip[9] = 0x45, 9, pkt.ProtoUDP
		binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
		copy(ip[12:], []byte{198, 18, 0, 1})
		copy(ip[16:], []byte{198, 18, 1, 2})
	}
	binary.BigEndian.PutUint16(b[l4:], 1000)
	binary.BigEndian.PutUint16(b[l4+2:], 9000)
	binary.BigEndian.PutUint16(b[l4+4:], uint16(n-l4))
	p := &rxpath.Packet{Len: n}
	for off := 0; off < n; off += seg {
		p.Segments = append(p.Segments, b[off:min(off+seg, n)])
	}
	p.Data = p.Segments[0]
	return p
}

func TestParseChain(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		f := testForwarder()
		p := jumbo(v6, 9000, 1792)
		before := append([]byte(nil), p.Data...)
		if err := f.parse(p); err != nil {
			t.Fatalf("v6 %v: %v", v6, err)
		}
		if f.fr.IPLen != 9000-14 || f.fr.TTL != 9 || f.fr.DstPort != 9000 || !f.fr.Dst.IsGlobalUnicast() {
			t.Errorf("v6 %v: parsed %+v", v6, f.fr)
		}
		if string(before) != string(p.Data) {
			t.Errorf("v6 %v: parse wrote into the packet", v6)
		}
		// An IP length beyond the chain is malformed.
		p.Len -= 100
		if err := f.parse(p); err == nil {
			t.Errorf("v6 %v: IP length beyond the packet accepted", v6)
		}
	}
}

// FuzzParseChain: parse never panics on any chain, never writes into the
// packet, and what it accepts has an IP length inside the whole packet.
func FuzzParseChain(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		p := jumbo(v6, 4000, 1792)
		var b []byte
		for _, s := range p.Segments {
			b = append(b, s...)
		}
		f.Add(b, uint16(1792))
	}
	f.Fuzz(func(t *testing.T, b []byte, seg uint16) {
		if len(b) == 0 || seg == 0 {
			return
		}
		orig := append([]byte(nil), b...)
		p := &rxpath.Packet{Len: len(b)}
		for off := 0; off < len(b); off += int(seg) {
			p.Segments = append(p.Segments, b[off:min(off+int(seg), len(b))])
		}
		p.Data = p.Segments[0]
		fw := testForwarder()
		if err := fw.parse(p); err == nil && fw.fr.L3 > 0 && fw.fr.L3+fw.fr.IPLen > len(b) {
			t.Fatalf("IP length %d at %d beyond a %d-byte packet", fw.fr.IPLen, fw.fr.L3, len(b))
		}
		if string(orig) != string(b) {
			t.Fatal("parse wrote into the packet")
		}
	})
}

// TestFinishPartialChain: over chains cut at even and odd offsets, IPv4
// and IPv6, and many checksum field values, finishPartialChain finishes
// exactly what csum.VerifyTransport calls Partial on the whole datagram,
// to a checksum that verifies (also one computed as 0, sent as 0xFFFF),
// and leaves the rest alone.
func TestFinishPartialChain(t *testing.T) {
	for _, c := range []struct{ v6, zero bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		v6, zero := c.v6, c.zero
		for _, seg := range []int{1792, 1791, 1000, 333} {
			p0 := jumbo(v6, 9000, seg)
			whole := func(p *rxpath.Packet) []byte {
				var b []byte
				for _, s := range p.Segments {
					b = append(b, s...)
				}
				return b
			}
			b0 := whole(p0)
			for i := range b0[64:] {
				b0[64+i] = byte(i*7 + i>>8) // a payload that sums to something
			}
			f := testForwarder()
			if err := pkt.Parse(b0, &f.fr); err != nil {
				t.Fatal(err)
			}
			l3, field := f.fr.L3, f.fr.L4+6
			if err := csum.FillTransport(b0[l3:]); err != nil {
				t.Fatal(err)
			}
			good := binary.BigEndian.Uint16(b0[field:])
			if zero {
				// Add the checksum to a payload word: the datagram then
				// sums to a computed 0, which UDP sends as 0xFFFF.
				w := binary.BigEndian.Uint16(b0[100:])
				binary.BigEndian.PutUint16(b0[100:], csum.Fold(uint32(w)+uint32(good)))
				if err := csum.FillTransport(b0[l3:]); err != nil {
					t.Fatal(err)
				}
				if good = binary.BigEndian.Uint16(b0[field:]); good != 0xffff {
					t.Fatalf("crafted a checksum of %#04x, want 0xffff", good)
				}
			}
			values := []uint16{0, 0xffff, good, ^good}
			for v := uint32(1); v < 1<<16; v += 251 {
				values = append(values, uint16(v))
			}
			var pseudo uint16
			if v6 {
				pseudo = csum.Fold(csum.PseudoHeaderIPv6(f.fr.Src.As16(), f.fr.Dst.As16(), pkt.ProtoUDP, uint32(9000-54)))
			} else {
				pseudo = csum.Fold(csum.PseudoHeaderIPv4(f.fr.Src.As4(), f.fr.Dst.As4(), pkt.ProtoUDP, uint16(9000-34)))
			}
			values = append(values, pseudo, ^pseudo)
			for _, v := range values {
				b := append([]byte(nil), b0...)
				binary.BigEndian.PutUint16(b[field:], v)
				p := &rxpath.Packet{Len: len(b)}
				for off := 0; off < len(b); off += seg {
					p.Segments = append(p.Segments, b[off:min(off+seg, len(b))])
				}
				p.Data = p.Segments[0]
				f := testForwarder()
				if err := f.parse(p); err != nil {
					t.Fatal(err)
				}
				verdict, err := csum.VerifyTransport(append([]byte(nil), b[l3:]...))
				f.finishPartialChain(p)
				finished := f.c.partialFinished.Load() == 1
				if finished != (err == nil && verdict == csum.Partial) {
					t.Fatalf("v6 %v, buffers of %d, field %#04x: finished %v, VerifyTransport says %v (%v)", v6, seg, v, finished, verdict, err)
				}
				got := binary.BigEndian.Uint16(b[field:])
				if !finished {
					if got != v {
						t.Fatalf("v6 %v, buffers of %d, field %#04x: changed to %#04x", v6, seg, v, got)
					}
					continue
				}
				if v, err := csum.VerifyTransport(b[l3:]); err != nil || v != csum.Good {
					t.Fatalf("v6 %v, buffers of %d: after finishing %#04x: %v, %v", v6, seg, got, v, err)
				}
			}
		}
	}
}
