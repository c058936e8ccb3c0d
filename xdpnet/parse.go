package xdpnet

import (
	"encoding/binary"
	"net/netip"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/pkt"
)

// verdict is what parseDatagram decided about a received frame.
type verdict uint8

const (
	accept    verdict = iota
	malformed         // pkt.Parse failed, or the headers disagree
	notOurs           // not a whole UDP datagram to the bound address and port
	badSum            // a wrong IPv4 header or UDP checksum
)

// parseDatagram checks that the Ethernet frame b holds one whole UDP
// datagram to local, with right checksums, and returns its payload (a
// slice of b) and its source. trustPartial accepts a UDP checksum field
// that holds only the pseudo-header sum, which a peer behind a software
// device (veth) leaves when it offloads its checksum: that device's kernel
// would accept it too. It never reads outside b and allocates nothing.
func parseDatagram(b []byte, local netip.AddrPort, trustPartial bool, f *pkt.Frame) ([]byte, netip.AddrPort, verdict) {
	if pkt.Parse(b, f) != nil {
		return nil, netip.AddrPort{}, malformed
	}
	if f.VLANs != 0 || f.Proto != pkt.ProtoUDP || f.L4 == 0 || f.Fragment {
		return nil, netip.AddrPort{}, notOurs
	}
	if f.Dst.Unmap() != local.Addr() || f.DstPort != local.Port() {
		return nil, netip.AddrPort{}, notOurs
	}
	src := f.Src.Unmap()
	if !src.IsValid() || src.IsUnspecified() || src.IsMulticast() || src.Is4() != local.Addr().Is4() {
		return nil, netip.AddrPort{}, notOurs
	}
	if f.L3+f.IPLen > len(b) || f.L4+8 > f.L3+f.IPLen {
		return nil, netip.AddrPort{}, malformed
	}
	ulen := int(binary.BigEndian.Uint16(b[f.L4+4:]))
	if ulen < 8 || f.L4+ulen > f.L3+f.IPLen {
		return nil, netip.AddrPort{}, malformed
	}
	seg := b[f.L4 : f.L4+ulen]
	field := binary.BigEndian.Uint16(seg[6:])
	var pseudo uint32
	if f.EtherType == pkt.EtherTypeIPv4 {
		ihl := int(b[f.L3]&0x0f) * 4
		if ihl < 20 || f.L3+ihl > f.L4 || csum.Checksum(b[f.L3:f.L3+ihl], 0) != 0 {
			return nil, netip.AddrPort{}, badSum
		}
		if field == 0 { // no checksum (RFC 768)
			return seg[8:], netip.AddrPortFrom(src, f.SrcPort), accept
		}
		pseudo = csum.PseudoHeaderIPv4(f.Src.As4(), f.Dst.As4(), csum.ProtoUDP, uint16(ulen))
	} else {
		if f.L4 != f.L3+40 {
			return nil, netip.AddrPort{}, notOurs // extension headers: the kernel's
		}
		if field == 0 { // mandatory over IPv6 (RFC 8200)
			return nil, netip.AddrPort{}, badSum
		}
		pseudo = csum.PseudoHeaderIPv6(f.Src.As16(), f.Dst.As16(), csum.ProtoUDP, uint32(ulen))
	}
	switch csum.VerifyUDP(seg, pseudo) {
	case csum.Good:
	case csum.Partial:
		if !trustPartial {
			return nil, netip.AddrPort{}, badSum
		}
	default:
		return nil, netip.AddrPort{}, badSum
	}
	return seg[8:], netip.AddrPortFrom(src, f.SrcPort), accept
}

// Header lengths of the datagrams the conn writes.
const (
	ethLen  = 14
	ipv4Len = 20
	ipv6Len = 40
	udpLen  = 8
)

// putHeaders writes the Ethernet, IP and UDP headers of a datagram of n
// payload bytes from src to dst into b and returns their length. The
// checksums are left zero: txpath fills them (Options.Checksum).
func putHeaders(b []byte, dstMAC, srcMAC [6]byte, src, dst netip.AddrPort, n int) int {
	copy(b[0:6], dstMAC[:])
	copy(b[6:12], srcMAC[:])
	off := ethLen
	if src.Addr().Is4() {
		binary.BigEndian.PutUint16(b[12:], pkt.EtherTypeIPv4)
		ip := b[off : off+ipv4Len]
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:], uint16(ipv4Len+udpLen+n))
		binary.BigEndian.PutUint32(ip[4:], 0x4000) // ID 0, DF
		ip[8], ip[9] = defaultTTL, pkt.ProtoUDP
		ip[10], ip[11] = 0, 0
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		off += ipv4Len
	} else {
		binary.BigEndian.PutUint16(b[12:], pkt.EtherTypeIPv6)
		ip := b[off : off+ipv6Len]
		binary.BigEndian.PutUint32(ip[0:], 0x60000000)
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen+n))
		ip[6], ip[7] = pkt.ProtoUDP, defaultTTL
		s, d := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
		off += ipv6Len
	}
	u := b[off : off+udpLen]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen+n))
	u[6], u[7] = 0, 0
	return off + udpLen
}

const defaultTTL = 64
