package pkt

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/csum"
)

func eth(et uint16, vlans ...uint16) []byte {
	b := make([]byte, 12, 64)
	for _, v := range vlans {
		b = binary.BigEndian.AppendUint16(b, EtherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return binary.BigEndian.AppendUint16(b, et)
}

func ipv4(proto uint8, ttl uint8, opts int, l4 []byte) []byte {
	ihl := 20 + opts
	h := make([]byte, ihl)
	h[0] = 0x40 | byte(ihl/4)
	binary.BigEndian.PutUint16(h[2:], uint16(ihl+len(l4)))
	h[8], h[9] = ttl, proto
	copy(h[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(h[10:], csum.Checksum(h, 0))
	return append(h, l4...)
}

func ipv6(next uint8, ext []byte, l4 []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(ext)+len(l4)))
	h[6], h[7] = next, 64
	a := netip.MustParseAddr("2001:db8::1").As16()
	copy(h[8:], a[:])
	a = netip.MustParseAddr("2001:db8::2").As16()
	copy(h[24:], a[:])
	return append(append(h, ext...), l4...)
}

func udp(sp, dp uint16, payload int) []byte {
	u := make([]byte, 8+payload)
	binary.BigEndian.PutUint16(u, sp)
	binary.BigEndian.PutUint16(u[2:], dp)
	binary.BigEndian.PutUint16(u[4:], uint16(8+payload))
	return u
}

func tcp(sp, dp uint16) []byte {
	t := make([]byte, 20)
	binary.BigEndian.PutUint16(t, sp)
	binary.BigEndian.PutUint16(t[2:], dp)
	t[12] = 5 << 4
	return t
}

func TestParse(t *testing.T) {
	hop := make([]byte, 8)
	hop[0] = ProtoUDP                             // next header
	frag := []byte{ProtoUDP, 0, 0, 8, 0, 0, 0, 1} // offset 1: not first
	for _, tc := range []struct {
		name  string
		frame []byte
		want  Frame
		err   error
	}{
		{"udp4", append(eth(EtherTypeIPv4), ipv4(ProtoUDP, 64, 0, udp(1, 2, 10))...),
			Frame{EtherType: EtherTypeIPv4, L3: 14, L4: 34, Proto: ProtoUDP, TTL: 64, IPLen: 38, SrcPort: 1, DstPort: 2}, nil},
		{"udp4 options vlan", append(eth(EtherTypeIPv4, 7), ipv4(ProtoUDP, 9, 8, udp(3, 4, 0))...),
			Frame{EtherType: EtherTypeIPv4, VLANs: 1, VLANID: 7, L3: 18, L4: 46, Proto: ProtoUDP, TTL: 9, IPLen: 36, SrcPort: 3, DstPort: 4}, nil},
		{"tcp4 qinq", append(eth(EtherTypeIPv4, 1, 2), ipv4(ProtoTCP, 64, 0, tcp(80, 443))...),
			Frame{EtherType: EtherTypeIPv4, VLANs: 2, VLANID: 1, L3: 22, L4: 42, Proto: ProtoTCP, TTL: 64, IPLen: 40, SrcPort: 80, DstPort: 443}, nil},
		{"icmp4", append(eth(EtherTypeIPv4), ipv4(ProtoICMP, 64, 0, []byte{8, 0, 0, 0})...),
			Frame{EtherType: EtherTypeIPv4, L3: 14, L4: 34, Proto: ProtoICMP, TTL: 64, IPLen: 24, ICMPType: 8}, nil},
		{"udp6", append(eth(EtherTypeIPv6), ipv6(ProtoUDP, nil, udp(5, 6, 1))...),
			Frame{EtherType: EtherTypeIPv6, L3: 14, L4: 54, Proto: ProtoUDP, TTL: 64, IPLen: 49, SrcPort: 5, DstPort: 6}, nil},
		{"udp6 hop-by-hop", append(eth(EtherTypeIPv6), ipv6(0, hop, udp(5, 6, 0))...),
			Frame{EtherType: EtherTypeIPv6, L3: 14, L4: 62, Proto: ProtoUDP, TTL: 64, IPLen: 56, SrcPort: 5, DstPort: 6}, nil},
		{"udp6 later fragment", append(eth(EtherTypeIPv6), ipv6(44, frag, udp(5, 6, 0))...),
			Frame{EtherType: EtherTypeIPv6, L3: 14, Proto: ProtoUDP, TTL: 64, IPLen: 56, Fragment: true}, nil},
		{"arp", append(eth(EtherTypeARP), make([]byte, 28)...), Frame{EtherType: EtherTypeARP}, nil},
		{"short", make([]byte, 13), Frame{}, ErrShort},
		{"ipv4 cut", append(eth(EtherTypeIPv4), ipv4(ProtoUDP, 64, 0, udp(1, 2, 10))[:30]...), Frame{}, ErrShort},
		{"bad ihl", func() []byte {
			b := append(eth(EtherTypeIPv4), ipv4(ProtoUDP, 64, 0, udp(1, 2, 0))...)
			b[14] = 0x44
			return b
		}(), Frame{}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			err := Parse(tc.frame, &f)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Parse = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			f.Src, f.Dst = netip.Addr{}, netip.Addr{}
			if f != tc.want {
				t.Fatalf("Parse =\n%+v, want\n%+v", f, tc.want)
			}
		})
	}
}

func TestDecTTL(t *testing.T) {
	for ttl := 0; ttl < 256; ttl++ {
		b := append(eth(EtherTypeIPv4), ipv4(ProtoUDP, uint8(ttl), 4, udp(1, 2, 3))...)
		var f Frame
		if err := Parse(b, &f); err != nil {
			t.Fatal(err)
		}
		ok := DecTTL(b, &f)
		if ok != (ttl > 1) {
			t.Fatalf("TTL %d: DecTTL = %v", ttl, ok)
		}
		if !ok {
			continue
		}
		if b[22] != uint8(ttl-1) {
			t.Fatalf("TTL %d became %d", ttl, b[22])
		}
		if c := csum.Checksum(b[14:38], 0); c != 0 {
			t.Fatalf("TTL %d: header no longer sums to 0xffff (%#04x)", ttl, c)
		}
	}
	b := append(eth(EtherTypeIPv6), ipv6(ProtoUDP, nil, udp(1, 2, 0))...)
	var f Frame
	if err := Parse(b, &f); err != nil {
		t.Fatal(err)
	}
	if !DecTTL(b, &f) || b[21] != 63 {
		t.Fatal("IPv6 hop limit not decremented")
	}
}

func TestParseAllocs(t *testing.T) {
	b := append(eth(EtherTypeIPv6), ipv6(ProtoUDP, nil, udp(5, 6, 1))...)
	var f Frame
	if n := testing.AllocsPerRun(100, func() { _ = Parse(b, &f) }); n != 0 {
		t.Fatalf("Parse allocates %v times", n)
	}
}

// FuzzParse: Parse never panics, and what it reports lies inside the frame.
func FuzzParse(f *testing.F) {
	f.Add(append(eth(EtherTypeIPv4), ipv4(ProtoUDP, 64, 0, udp(1, 2, 10))...))
	f.Add(append(eth(EtherTypeIPv4, 5), ipv4(ProtoTCP, 64, 8, tcp(1, 2))...))
	f.Add(append(eth(EtherTypeIPv6), ipv6(0, []byte{ProtoUDP, 0, 0, 0, 0, 0, 0, 0}, udp(5, 6, 0))...))
	f.Add(append(eth(EtherTypeIPv6), ipv6(44, []byte{ProtoUDP, 0, 0, 1, 0, 0, 0, 1}, udp(5, 6, 0))...))
	f.Add(append(eth(EtherTypeIPv4), ipv4(ProtoICMP, 1, 0, []byte{11, 0, 0, 0})...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		if Parse(b, &fr) != nil {
			return
		}
		if fr.L3 > len(b) || fr.L4 > len(b) || fr.L3+fr.IPLen > len(b) {
			t.Fatalf("offsets outside the frame: %+v (len %d)", fr, len(b))
		}
		if fr.L4 != 0 && fr.L4 < fr.L3 {
			t.Fatalf("L4 before L3: %+v", fr)
		}
		c := append([]byte(nil), b...)
		if DecTTL(c, &fr) && fr.EtherType == EtherTypeIPv4 {
			ihl := int(c[fr.L3]&15) * 4
			before := csum.Checksum(b[fr.L3:fr.L3+ihl], 0)
			after := csum.Checksum(c[fr.L3:fr.L3+ihl], 0)
			if before == 0 && after != 0 {
				t.Fatalf("a valid header checksum became invalid after DecTTL")
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	frame := append(eth(EtherTypeIPv4), ipv4(ProtoUDP, 64, 0, udp(1, 2, 18))...)
	var f Frame
	b.ReportAllocs()
	for b.Loop() {
		_ = Parse(frame, &f)
		DecTTL(frame, &f)
		frame[22] = 64
	}
}
