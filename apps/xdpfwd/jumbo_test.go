package main

import (
	"encoding/binary"
	"math/rand/v2"
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
	return chain(b, seg)
}

// chain makes the frame b a packet of buffers of at most seg bytes, as
// the kernel hands over a multi-buffer packet.
func chain(b []byte, seg int) *rxpath.Packet {
	p := &rxpath.Packet{Len: len(b)}
	for off := 0; off < len(b); off += seg {
		p.Segments = append(p.Segments, b[off:min(off+seg, len(b))])
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
		p := chain(b, int(seg))
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
				p := chain(b, seg)
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

// chainFrame builds an Ethernet + IPv4 (with opts option words) or IPv6
// frame of random bytes with a UDP or TCP header, an IP length of ipLen
// and pad bytes after the datagram.
func chainFrame(r *rand.Rand, v6 bool, proto uint8, opts int, ipLen, pad int) (b []byte, l3, l4 int) {
	l3 = 14
	n := l3 + ipLen + pad
	b = make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if v6 {
		binary.BigEndian.PutUint16(b[12:], pkt.EtherTypeIPv6)
		ip := b[14:]
		ip[0], ip[1], ip[2], ip[3] = 0x60, 0, 0, 0
		ip[6], ip[7] = proto, 9
		binary.BigEndian.PutUint16(ip[4:], uint16(ipLen-40))
		a, d := netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8:1::2").As16()
		copy(ip[8:], a[:])
		copy(ip[24:], d[:])
		l4 = l3 + 40
	} else {
		binary.BigEndian.PutUint16(b[12:], pkt.EtherTypeIPv4)
		ip := b[14:]
		ip[0], ip[1], ip[8], ip[9] = 0x45+byte(opts), 0, 9, proto
		binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
		binary.BigEndian.PutUint16(ip[6:], 0)
		copy(ip[12:], []byte{198, 18, 0, 1})
		copy(ip[16:], []byte{198, 18, 1, 2})
		l4 = l3 + 20 + 4*opts
	}
	if proto == pkt.ProtoUDP {
		binary.BigEndian.PutUint16(b[l4+4:], uint16(l3+ipLen-l4))
	} else {
		b[l4+12] = 5 << 4
	}
	return
}

// TestFinishPartialChainShapes: UDP and TCP, IPv4 with options and IPv6,
// bytes after the datagram and buffers of many sizes: a partial checksum
// is finished to what csum.FillTransport writes on the whole datagram
// (fails when the chain's sum is not clipped at the IP length).
func TestFinishPartialChainShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ran, multi := 0, 0
	defer func() {
		if multi < 100 {
			t.Errorf("only %d of %d cases were multi-buffer", multi, ran)
		}
	}()
	for _, v6 := range []bool{false, true} {
		for _, proto := range []uint8{pkt.ProtoUDP, pkt.ProtoTCP} {
			for _, opts := range []int{0, 1, 3} {
				if v6 && opts > 0 {
					continue
				}
				for _, ipLen := range []int{3000, 3001, 8999, 9000 - 14} {
					for _, pad := range []int{0, 1, 7} {
						for _, seg := range []int{4096, 2048, 1791, 333, 101} {
							b, l3, l4 := chainFrame(r, v6, proto, opts, ipLen, pad)
							field := l4 + 6
							if proto == pkt.ProtoTCP {
								field = l4 + 16
							}
							// Make the field partial: the folded pseudo header.
							ip := b[l3 : l3+ipLen]
							var pseudo uint32
							if v6 {
								pseudo = csum.PseudoHeaderIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), proto, uint32(ipLen-40))
							} else {
								pseudo = csum.PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), proto, uint16(l3+ipLen-l4))
							}
							binary.BigEndian.PutUint16(b[field:], csum.Fold(pseudo))
							ref := append([]byte(nil), b...)
							v, err := csum.VerifyTransport(ref[l3 : l3+ipLen])
							if err != nil || v != csum.Partial {
								continue // a random payload that happens to be finished
							}
							if err := csum.FillTransport(ref[l3 : l3+ipLen]); err != nil {
								t.Fatal(err)
							}
							p := chain(b, seg)
							f := testForwarder()
							if err := f.parse(p); err != nil {
								t.Fatalf("v6 %v proto %d opts %d ipLen %d pad %d seg %d: parse: %v", v6, proto, opts, ipLen, pad, seg, err)
							}
							ran++
							if len(p.Segments) > 1 {
								multi++
							}
							if len(p.Segments) == 1 {
								f.finishPartial(b[l3 : l3+ipLen])
							} else {
								f.finishPartialChain(p)
							}
							if got, want := binary.BigEndian.Uint16(b[field:]), binary.BigEndian.Uint16(ref[field:]); got != want || f.c.partialFinished.Load() != 1 {
								t.Fatalf("v6 %v proto %d opts %d ipLen %d pad %d seg %d: field %#04x want %#04x (finished %d)", v6, proto, opts, ipLen, pad, seg, got, want, f.c.partialFinished.Load())
							}
						}
					}
				}
			}
		}
	}
}
