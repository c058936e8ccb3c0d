package csum

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

var (
	src4 = netip.MustParseAddr("198.18.0.1")
	dst4 = netip.MustParseAddr("198.18.0.2")
)

// testFrameUDP4 builds an Ethernet+IPv4+UDP frame of n bytes (n >= 42)
// with zero checksums.
func testFrameUDP4(n int) []byte {
	f := make([]byte, n)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	p := f[14:]
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, ProtoUDP
	a, b := src4.As4(), dst4.As4()
	copy(p[12:], a[:])
	copy(p[16:], b[:])
	u := p[20:]
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], 9)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	for i := 8; i < len(u); i++ {
		u[i] = byte(i * 13)
	}
	return f
}

// refPseudo4 and refPseudo6 lay the pseudo-headers out as bytes, as the
// RFCs draw them, for the byte-pair reference.
func refPseudo4(src, dst netip.Addr, proto uint8, length uint16) []byte {
	b := make([]byte, 12)
	a, d := src.As4(), dst.As4()
	copy(b, a[:])
	copy(b[4:], d[:])
	b[9] = proto
	binary.BigEndian.PutUint16(b[10:], length)
	return b
}

func refPseudo6(src, dst netip.Addr, proto uint8, length uint32) []byte {
	b := make([]byte, 40)
	a, d := src.As16(), dst.As16()
	copy(b, a[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint32(b[32:], length)
	b[39] = proto
	return b
}

func TestPseudoHeaders(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 2000; i++ {
		var a4, b4 [4]byte
		var a6, b6 [16]byte
		for j := range a6 {
			a6[j], b6[j] = byte(r.Uint32()), byte(r.Uint32())
		}
		copy(a4[:], a6[:])
		copy(b4[:], b6[:])
		proto := uint8(r.Uint32())
		l16 := uint16(r.Uint32())
		l32 := r.Uint32()
		if i == 0 {
			a6, b6, l32, proto = [16]byte{}, [16]byte{}, 0xffffffff, 0xff
			for j := range a6 {
				a6[j], b6[j] = 0xff, 0xff
			}
		}
		want4 := refSum(refPseudo4(netip.AddrFrom4(a4), netip.AddrFrom4(b4), proto, l16), 0)
		if got := Fold(PseudoHeaderIPv4(a4, b4, proto, l16)); got != want4 {
			t.Fatalf("PseudoHeaderIPv4 = %#x, want %#x", got, want4)
		}
		want6 := refSum(refPseudo6(netip.AddrFrom16(a6), netip.AddrFrom16(b6), proto, l32), 0)
		if got := Fold(PseudoHeaderIPv6(a6, b6, proto, l32)); got != want6 {
			t.Fatalf("PseudoHeaderIPv6 = %#x, want %#x", got, want6)
		}
	}
}

// TestIPv4HeaderKnown is the worked example of the IPv4 header checksum
// that Wikipedia and many textbooks use.
func TestIPv4HeaderKnown(t *testing.T) {
	h := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xde, 0xad,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := IPv4Header(h); got != 0xb861 {
		t.Fatalf("IPv4Header = %#x, want 0xb861", got)
	}
	if err := FillIPv4(h); err != nil {
		t.Fatal(err)
	}
	if h[10] != 0xb8 || h[11] != 0x61 {
		t.Fatalf("FillIPv4 stored %x", h[10:12])
	}
	// With options (IHL 6): the option word counts.
	o := append(append([]byte{}, h...), 0x01, 0x01, 0x01, 0x00)
	o[0] = 0x46
	if got, want := IPv4Header(o), refCsumSkipping(o, 10); got != want {
		t.Fatalf("IPv4Header with options = %#x, want %#x", got, want)
	}
}

// refCsumSkipping is the reference checksum of b with the 16-bit field at
// off taken as zero.
func refCsumSkipping(b []byte, off int) uint16 {
	c := append([]byte{}, b...)
	c[off], c[off+1] = 0, 0
	return ^refSum(c, 0)
}

// TestFillFrame builds UDP/IPv4, UDP/IPv6, TCP/IPv4 and TCP/IPv6 frames of
// many sizes, odd ones included, fills them, and checks each checksum with
// the byte-pair reference over the RFC pseudo-header laid out as bytes.
func TestFillFrame(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, v6 := range []bool{false, true} {
		for _, proto := range []uint8{ProtoUDP, ProtoTCP} {
			for _, vlan := range []int{0, 1, 2} {
				for _, plen := range []int{0, 1, 2, 3, 17, 64, 1000, 1473} {
					f, l3 := buildFrame(r, v6, proto, vlan, plen)
					// Ethernet padding after the packet must be ignored.
					f = append(f, 0xee, 0xee, 0xee)
					if err := FillFrame(f); err != nil {
						t.Fatalf("v6 %v proto %d vlan %d len %d: %v", v6, proto, vlan, plen, err)
					}
					p := f[l3 : len(f)-3]
					var seg, pseudo []byte
					if v6 {
						seg = p[40:]
						pseudo = refPseudo6(netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40])), proto, uint32(len(seg)))
					} else {
						if got := ^refSum(p[:20], 0); got != 0 {
							t.Fatalf("IPv4 header does not verify: %#x", got)
						}
						seg = p[20:]
						pseudo = refPseudo4(netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20])), proto, uint16(len(seg)))
					}
					whole := append(pseudo, seg...)
					if got := ^refSum(whole, 0); got != 0 {
						t.Fatalf("v6 %v proto %d vlan %d len %d: segment does not verify (%#x)", v6, proto, vlan, plen, got)
					}
					field := 16
					if proto == ProtoUDP {
						field = 6
					}
					if c := binary.BigEndian.Uint16(seg[field:]); c == 0 && proto == ProtoUDP {
						t.Fatalf("UDP checksum 0 stored")
					}
				}
			}
		}
	}
}

// buildFrame returns a frame with random addresses, ports and payload and
// zero checksums, and the offset of its IP header.
func buildFrame(r *rand.Rand, v6 bool, proto uint8, vlans, plen int) ([]byte, int) {
	f := make([]byte, 12, 2000)
	for i := range f {
		f[i] = byte(r.Uint32())
	}
	for i := 0; i < vlans; i++ {
		f = append(f, 0x81, 0x00, byte(r.Uint32())&0x0f, byte(r.Uint32()))
	}
	l4 := 8
	if proto == ProtoTCP {
		l4 = 20
	}
	if v6 {
		f = append(f, 0x86, 0xdd)
	} else {
		f = append(f, 0x08, 0x00)
	}
	l3 := len(f)
	if v6 {
		h := make([]byte, 40)
		h[0] = 0x60
		binary.BigEndian.PutUint16(h[4:], uint16(l4+plen))
		h[6], h[7] = proto, 64
		for i := 8; i < 40; i++ {
			h[i] = byte(r.Uint32())
		}
		f = append(f, h...)
	} else {
		h := make([]byte, 20)
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+l4+plen))
		h[8], h[9] = 64, proto
		for i := 12; i < 20; i++ {
			h[i] = byte(r.Uint32())
		}
		f = append(f, h...)
	}
	seg := make([]byte, l4+plen)
	for i := range seg {
		seg[i] = byte(r.Uint32())
	}
	if proto == ProtoUDP {
		binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
		seg[6], seg[7] = 0xde, 0xad // must be overwritten
	} else {
		seg[12] = 5 << 4
		seg[16], seg[17] = 0xde, 0xad
	}
	return append(f, seg...), l3
}

// TestFillUDPZeroRule crafts a UDP/IPv4 datagram whose checksum computes
// to 0 and checks that 0xFFFF is stored, and that it verifies.
func TestFillUDPZeroRule(t *testing.T) {
	f := testFrameUDP4(64)
	p := f[14:]
	if err := FillTransport(p); err != nil {
		t.Fatal(err)
	}
	// Adjust two payload bytes so that the data sums to -0: add the stored
	// checksum to a payload word (that word and the checksum then sum to
	// all ones over the segment... simply: make ~sum == 0).
	u := p[20:]
	c := binary.BigEndian.Uint16(u[6:])
	w := binary.BigEndian.Uint16(u[8:])
	// New word w' with w' = w + c (ones' complement) makes the sum 0xFFFF.
	s := uint32(w) + uint32(c)
	s = s&0xffff + s>>16
	binary.BigEndian.PutUint16(u[8:], uint16(s))
	if err := FillTransport(p); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint16(u[6:]); got != 0xffff {
		t.Fatalf("UDP checksum stored %#x, want 0xffff", got)
	}
	// TCP has no such rule: the same data as TCP would carry 0.
	if got := Finish(Sum(u[:6], Sum(u[8:], PseudoHeaderIPv4([4]byte(p[12:16]), [4]byte(p[16:20]), ProtoUDP, uint16(len(u)))))); got != 0 {
		t.Fatalf("premise: computed checksum %#x, want 0", got)
	}
}

func TestFillErrors(t *testing.T) {
	good := testFrameUDP4(60)
	for _, tc := range []struct {
		name string
		mod  func(f []byte) []byte
		want error
	}{
		{"short ethernet", func(f []byte) []byte { return f[:13] }, ErrTruncated},
		{"arp", func(f []byte) []byte { f[12], f[13] = 0x08, 0x06; return f }, ErrUnsupported},
		{"version mismatch", func(f []byte) []byte { f[14] = 0x65; return f }, ErrUnsupported},
		{"ihl 4", func(f []byte) []byte { f[14] = 0x44; return f }, ErrUnsupported},
		{"truncated ip", func(f []byte) []byte { return f[:30] }, ErrTruncated},
		{"total length past end", func(f []byte) []byte { binary.BigEndian.PutUint16(f[16:], 200); return f }, ErrTruncated},
		{"fragment", func(f []byte) []byte { f[20] = 0x20; return f }, ErrUnsupported},
		{"icmp", func(f []byte) []byte { f[23] = 1; return f }, ErrUnsupported},
	} {
		f := tc.mod(append([]byte{}, good...))
		if err := FillFrame(f); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestFillAllocs(t *testing.T) {
	f := testFrameUDP4(1500)
	if n := testing.AllocsPerRun(100, func() {
		if err := FillFrame(f); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("FillFrame: %v allocs", n)
	}
	dst := make([]byte, 1500)
	if n := testing.AllocsPerRun(100, func() { sink = CopyAndSum(dst, f, Sum(f, 0)) }); n != 0 {
		t.Fatalf("CopyAndSum/Sum: %v allocs", n)
	}
}
