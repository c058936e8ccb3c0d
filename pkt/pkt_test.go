package pkt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/pkt"
)

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 0xa}
	macB = [6]byte{0x02, 0, 0, 0, 0, 0xb}
)

// datagram builds an Ethernet frame with a UDP datagram from src:sp to
// dst:dp, vlans VLAN tags, IPv4 options of opts bytes, and the given UDP
// checksum field (the header checksum of IPv4 is right).
func datagram(src, dst netip.Addr, sp, dp uint16, payload []byte, vlans, opts int, udpSum uint16) []byte {
	b := append(macB[:], macA[:]...)
	for i := 0; i < vlans; i++ {
		b = binary.BigEndian.AppendUint16(b, pkt.EtherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, uint16(100+i))
	}
	u := binary.BigEndian.AppendUint16(nil, sp)
	u = binary.BigEndian.AppendUint16(u, dp)
	u = binary.BigEndian.AppendUint16(u, uint16(8+len(payload)))
	u = binary.BigEndian.AppendUint16(u, udpSum)
	u = append(u, payload...)
	if src.Is4() {
		b = binary.BigEndian.AppendUint16(b, pkt.EtherTypeIPv4)
		h := make([]byte, 20+opts)
		h[0] = 0x40 | byte((20+opts)/4)
		binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(u)))
		h[8], h[9] = 7, pkt.ProtoUDP
		s4, d4 := src.As4(), dst.As4()
		copy(h[12:], s4[:])
		copy(h[16:], d4[:])
		binary.BigEndian.PutUint16(h[10:], csum.Checksum(h, 0))
		return append(append(b, h...), u...)
	}
	b = binary.BigEndian.AppendUint16(b, pkt.EtherTypeIPv6)
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(u)))
	h[6], h[7] = pkt.ProtoUDP, 7
	s16, d16 := src.As16(), dst.As16()
	copy(h[8:], s16[:])
	copy(h[24:], d16[:])
	return append(append(b, h...), u...)
}

// checkUDP fails unless the frame's IPv4 header checksum (if any) and UDP
// checksum verify.
func checkUDP(t *testing.T, b []byte, f *pkt.Frame) {
	t.Helper()
	var ph uint32
	udpLen := f.L3 + f.IPLen - f.L4
	if f.EtherType == pkt.EtherTypeIPv4 {
		ihl := int(b[f.L3]&15) * 4
		if c := csum.Checksum(b[f.L3:f.L3+ihl], 0); c != 0 {
			t.Fatalf("IPv4 header checksum does not verify (%#04x)", c)
		}
		ph = csum.PseudoHeaderIPv4(f.Src.As4(), f.Dst.As4(), csum.ProtoUDP, uint16(udpLen))
	} else {
		ph = csum.PseudoHeaderIPv6(f.Src.As16(), f.Dst.As16(), csum.ProtoUDP, uint32(udpLen))
	}
	if binary.BigEndian.Uint16(b[f.L4+6:]) == 0 {
		t.Fatal("UDP checksum 0 (none)")
	}
	if c := csum.Finish(csum.Sum(b[f.L4:f.L4+udpLen], ph)); c != 0 {
		t.Fatalf("UDP checksum does not verify (%#04x)", c)
	}
}

func TestReplyUDP(t *testing.T) {
	v4a, v4b := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	for _, tc := range []struct {
		name       string
		src, dst   netip.Addr
		vlans      int
		opts       int
		payload    int
		udpSum     uint16 // as received: wrong, partial or none
		pad        int    // Ethernet padding after the datagram
		wantLength int
	}{
		{name: "ipv4", src: v4a, dst: v4b, payload: 18, udpSum: 0x1234},
		{name: "ipv4 no checksum, padded", src: v4a, dst: v4b, payload: 1, udpSum: 0, pad: 9},
		{name: "ipv4 options vlan", src: v4a, dst: v4b, vlans: 1, opts: 8, payload: 333, udpSum: 0xffff},
		{name: "ipv4 qinq odd", src: v4a, dst: v4b, vlans: 2, payload: 1001},
		{name: "ipv6", src: v6a, dst: v6b, payload: 64, udpSum: 0xbeef},
		{name: "ipv6 empty", src: v6a, dst: v6b, payload: 0},
		{name: "ipv6 vlan jumbo", src: v6a, dst: v6b, vlans: 1, payload: 8900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := make([]byte, tc.payload)
			for i := range payload {
				payload[i] = byte(i*7 + 3)
			}
			b := datagram(tc.src, tc.dst, 5000, 9000, payload, tc.vlans, tc.opts, tc.udpSum)
			want := len(b)
			b = append(b, make([]byte, tc.pad)...)
			var f pkt.Frame
			if err := pkt.Parse(b, &f); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.Payload(b), payload) {
				t.Fatal("Payload is not the payload")
			}
			n, err := pkt.ReplyUDP(b, &f)
			if err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Fatalf("reply length %d, want %d", n, want)
			}
			var g pkt.Frame
			if err := pkt.Parse(b[:n], &g); err != nil {
				t.Fatal(err)
			}
			if g != f {
				t.Fatalf("ReplyUDP left f as\n%+v, the reply parses as\n%+v", f, g)
			}
			if g.Src != tc.dst || g.Dst != tc.src || g.SrcPort != 9000 || g.DstPort != 5000 || g.TTL != pkt.ReplyTTL {
				t.Fatalf("reply: %+v", g)
			}
			if !bytes.Equal(b[0:6], macA[:]) || !bytes.Equal(b[6:12], macB[:]) {
				t.Fatalf("MACs not swapped: %x", b[:12])
			}
			if !bytes.Equal(g.Payload(b), payload) {
				t.Fatal("payload changed")
			}
			checkUDP(t, b[:n], &g)
		})
	}
}

func TestReplyUDPRefuses(t *testing.T) {
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	frag := datagram(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1, 2, []byte("x"), 0, 0, 0)
	frag[14+6] = 0x20 // MF
	ext := datagram(v6a, v6b, 1, 2, []byte("x"), 0, 0, 0)
	// Insert an 8-byte destination options header in front of UDP.
	ext = append(ext[:54], append([]byte{pkt.ProtoUDP, 0, 1, 4, 0, 0, 0, 0}, ext[54:]...)...)
	ext[20] = 60
	binary.BigEndian.PutUint16(ext[18:], binary.BigEndian.Uint16(ext[18:])+8)
	tcp := datagram(v6a, v6b, 1, 2, make([]byte, 12), 0, 0, 0)
	tcp[20] = pkt.ProtoTCP
	tcp[54+12] = 5 << 4
	for name, b := range map[string][]byte{"ipv4 fragment": frag, "ipv6 extension header": ext, "tcp": tcp} {
		var f pkt.Frame
		if err := pkt.Parse(b, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		before := bytes.Clone(b)
		if _, err := pkt.ReplyUDP(b, &f); !errors.Is(err, pkt.ErrNotUDP) {
			t.Fatalf("%s: ReplyUDP = %v, want ErrNotUDP", name, err)
		}
		if !bytes.Equal(b, before) {
			t.Fatalf("%s: ReplyUDP changed a frame it refused", name)
		}
	}
}

func TestReplyUDPAllocs(t *testing.T) {
	b := datagram(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1, 2, make([]byte, 100), 1, 0, 0)
	var f pkt.Frame
	n := testing.AllocsPerRun(100, func() {
		if err := pkt.Parse(b, &f); err != nil {
			t.Fatal(err)
		}
		if _, err := pkt.ReplyUDP(b, &f); err != nil {
			t.Fatal(err)
		}
		_ = f.Payload(b)
	})
	if n != 0 {
		t.Fatalf("Parse + ReplyUDP allocate %v times", n)
	}
}

// FuzzReplyUDP: whatever Parse accepts, ReplyUDP either refuses without
// touching the frame or leaves a reply that parses to the swapped frame
// with checksums that verify; a second reply gives the first back.
func FuzzReplyUDP(f *testing.F) {
	f.Add(datagram(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1, 2, []byte("hello"), 0, 4, 0))
	f.Add(datagram(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1, 2, []byte("hello!"), 2, 0, 7))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr pkt.Frame
		if pkt.Parse(b, &fr) != nil {
			return
		}
		before := bytes.Clone(b)
		n, err := pkt.ReplyUDP(b, &fr)
		if err != nil {
			if !bytes.Equal(b, before) {
				t.Fatalf("ReplyUDP failed (%v) and changed the frame", err)
			}
			return
		}
		var g pkt.Frame
		if err := pkt.Parse(b[:n], &g); err != nil {
			t.Fatalf("the reply does not parse: %v", err)
		}
		if g != fr {
			t.Fatalf("ReplyUDP left f as\n%+v, the reply parses as\n%+v", fr, g)
		}
		checkUDP(t, b[:n], &g)
		first := bytes.Clone(b[:n])
		if _, err := pkt.ReplyUDP(b, &g); err != nil {
			t.Fatal(err)
		}
		if _, err := pkt.ReplyUDP(b, &g); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b[:n], first) {
			t.Fatal("two more replies did not give the first reply back")
		}
	})
}

func BenchmarkReplyUDP(b *testing.B) {
	frame := datagram(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1, 2, make([]byte, 64), 0, 0, 0)
	var f pkt.Frame
	b.ReportAllocs()
	for b.Loop() {
		_ = pkt.Parse(frame, &f)
		_, _ = pkt.ReplyUDP(frame, &f)
	}
}
