package xdpnet

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/pkt"
)

var (
	fuzzLocal4 = netip.MustParseAddrPort("198.18.0.1:53")
	fuzzLocal6 = netip.MustParseAddrPort("[2001:db8::1]:53")
	fuzzPeer4  = netip.MustParseAddrPort("198.18.0.2:4000")
	fuzzPeer6  = netip.MustParseAddrPort("[2001:db8::2]:4000")
)

// goodFrame is a datagram as the conn writes it, with its checksums.
func goodFrame(src, dst netip.AddrPort, payload []byte) []byte {
	b := make([]byte, ethLen+ipv6Len+udpLen+len(payload))
	n := putHeaders(b, [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}, src, dst, len(payload))
	copy(b[n:], payload)
	b = b[:n+len(payload)]
	if err := csum.FillFrame(b); err != nil {
		panic(err)
	}
	return b
}

// FuzzParseDatagram: parseDatagram never panics, and what it accepts is
// a datagram to the bound address and port whose payload lies inside
// the frame, with a UDP length that fits the IP packet and a checksum that
// verifies (or is absent over IPv4).
func FuzzParseDatagram(f *testing.F) {
	f.Add(goodFrame(fuzzPeer4, fuzzLocal4, []byte("hello")), false)
	f.Add(goodFrame(fuzzPeer6, fuzzLocal6, []byte("hello")), true)
	f.Add(goodFrame(fuzzPeer4, fuzzLocal4, nil), false)
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		local := fuzzLocal4
		if v6 {
			local = fuzzLocal6
		}
		var fr pkt.Frame
		orig := bytes.Clone(b)
		payload, src, v := parseDatagram(b, local, false, &fr)
		if !bytes.Equal(b, orig) {
			t.Fatal("parseDatagram changed the frame")
		}
		if v != accept {
			if payload != nil {
				t.Fatal("payload of a rejected frame")
			}
			return
		}
		if fr.Dst.Unmap() != local.Addr() || fr.DstPort != local.Port() || !src.IsValid() {
			t.Fatalf("accepted a datagram to %v:%d from %v", fr.Dst, fr.DstPort, src)
		}
		ulen := int(binary.BigEndian.Uint16(b[fr.L4+4:]))
		if fr.L4+ulen > fr.L3+fr.IPLen || fr.L3+fr.IPLen > len(b) || len(payload) != ulen-8 {
			t.Fatalf("payload of %d bytes, UDP length %d, IP length %d, frame %d", len(payload), ulen, fr.IPLen, len(b))
		}
		seg := b[fr.L4 : fr.L4+ulen]
		if &payload[:cap(payload)][0] != &b[fr.L4+8 : fr.L4+8+1][0] && len(payload) > 0 {
			t.Fatal("payload is not the frame's")
		}
		var pseudo uint32
		if local.Addr().Is4() {
			if binary.BigEndian.Uint16(seg[6:]) == 0 {
				return
			}
			pseudo = csum.PseudoHeaderIPv4(fr.Src.As4(), fr.Dst.As4(), csum.ProtoUDP, uint16(ulen))
		} else {
			pseudo = csum.PseudoHeaderIPv6(fr.Src.As16(), fr.Dst.As16(), csum.ProtoUDP, uint32(ulen))
		}
		if csum.Finish(csum.Sum(seg, pseudo)) != 0 {
			t.Fatal("accepted a wrong UDP checksum")
		}
	})
}

// TestParseGood: the conn's own frames parse back to their payload.
func TestParseGood(t *testing.T) {
	for _, c := range []struct{ src, dst netip.AddrPort }{{fuzzPeer4, fuzzLocal4}, {fuzzPeer6, fuzzLocal6}} {
		for _, n := range []int{0, 1, 7, 1400} {
			p := bytes.Repeat([]byte{0xa5}, n)
			var fr pkt.Frame
			got, src, v := parseDatagram(goodFrame(c.src, c.dst, p), c.dst, false, &fr)
			if v != accept || !bytes.Equal(got, p) || src != c.src {
				t.Fatalf("%v, %d bytes: verdict %d, %d bytes from %v", c.dst, n, v, len(got), src)
			}
			_, _, v = parseDatagram(goodFrame(c.src, c.dst, p), netip.AddrPortFrom(c.dst.Addr(), 54), false, &fr)
			if v != notOurs {
				t.Fatalf("another port: verdict %d", v)
			}
		}
	}
}
