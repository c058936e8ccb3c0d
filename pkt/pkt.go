package pkt

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/xdpkit/xdpkit/csum"
)

// EtherTypes and IP protocol numbers.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeVLAN = 0x8100
	EtherTypeQinQ = 0x88a8
	EtherTypeIPv6 = 0x86dd

	ProtoICMP   = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoICMPv6 = 58
)

// Errors from Parse and ReplyUDP.
var (
	ErrShort     = errors.New("pkt: truncated header")
	ErrMalformed = errors.New("pkt: malformed header")
	// ErrNotUDP: ReplyUDP was given a frame that is not one whole UDP
	// datagram over IPv4, or over IPv6 without extension headers.
	ErrNotUDP = errors.New("pkt: not an unfragmented UDP datagram")
)

// Frame describes a parsed Ethernet frame. Offsets are from the start of
// the frame; a zero L3 or L4 means that layer is absent or not parsed.
type Frame struct {
	EtherType uint16 // after any VLAN tags
	VLANs     int    // number of VLAN tags (0..2)
	VLANID    uint16 // the outer tag's VLAN ID
	L3        int    // offset of the IP header
	L4        int    // offset of the transport header, 0 for a non-first fragment
	Proto     uint8  // transport protocol (after IPv6 extension headers)
	Src, Dst  netip.Addr
	TTL       uint8  // IPv4 TTL or IPv6 hop limit
	IPLen     int    // IP header plus payload, from the IP header's length field
	Fragment  bool   // an IPv4 fragment or an IPv6 fragment header
	SrcPort   uint16 // UDP or TCP
	DstPort   uint16
	ICMPType  uint8
}

// Parse parses b into f. It stops at the first layer it does not know
// (f then describes what came before) and returns an error only for a
// header that is cut short or inconsistent.
func Parse(b []byte, f *Frame) error {
	*f = Frame{}
	if len(b) < 14 {
		return ErrShort
	}
	off := 12
	et := binary.BigEndian.Uint16(b[off:])
	off += 2
	for (et == EtherTypeVLAN || et == EtherTypeQinQ) && f.VLANs < 2 {
		if len(b) < off+4 {
			return ErrShort
		}
		if f.VLANs == 0 {
			f.VLANID = binary.BigEndian.Uint16(b[off:]) & 0x0fff
		}
		et = binary.BigEndian.Uint16(b[off+2:])
		off += 4
		f.VLANs++
	}
	f.EtherType = et
	switch et {
	case EtherTypeIPv4:
		return parseIPv4(b, off, f)
	case EtherTypeIPv6:
		return parseIPv6(b, off, f)
	}
	return nil
}

func parseIPv4(b []byte, off int, f *Frame) error {
	if len(b) < off+20 {
		return ErrShort
	}
	ip := b[off:]
	if ip[0]>>4 != 4 {
		return ErrMalformed
	}
	ihl := int(ip[0]&15) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ihl < 20 || total < ihl {
		return ErrMalformed
	}
	if len(ip) < ihl || len(ip) < total {
		return ErrShort
	}
	f.L3 = off
	f.IPLen = total
	f.TTL = ip[8]
	f.Proto = ip[9]
	f.Src = netip.AddrFrom4([4]byte(ip[12:16]))
	f.Dst = netip.AddrFrom4([4]byte(ip[16:20]))
	frag := binary.BigEndian.Uint16(ip[6:])
	f.Fragment = frag&0x3fff != 0 // MF or an offset
	if frag&0x1fff != 0 {
		return nil // not the first fragment: no transport header
	}
	return parseL4(b[:off+total], off+ihl, f)
}

func parseIPv6(b []byte, off int, f *Frame) error {
	if len(b) < off+40 {
		return ErrShort
	}
	ip := b[off:]
	if ip[0]>>4 != 6 {
		return ErrMalformed
	}
	total := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if len(ip) < total {
		return ErrShort
	}
	f.L3 = off
	f.IPLen = total
	f.TTL = ip[7]
	f.Src = netip.AddrFrom16([16]byte(ip[8:24]))
	f.Dst = netip.AddrFrom16([16]byte(ip[24:40]))
	end := off + total
	next := ip[6]
	off += 40
	for i := 0; i < 8; i++ { // at most 8 extension headers
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if end < off+8 {
				return ErrShort
			}
			n := (int(b[off+1]) + 1) * 8
			if end < off+n {
				return ErrShort
			}
			next = b[off]
			off += n
		case 44: // fragment
			if end < off+8 {
				return ErrShort
			}
			f.Fragment = true
			next = b[off]
			if binary.BigEndian.Uint16(b[off+2:])&0xfff8 != 0 {
				f.Proto = next
				return nil // not the first fragment
			}
			off += 8
		default:
			f.Proto = next
			return parseL4(b[:end], off, f)
		}
	}
	return ErrMalformed
}

func parseL4(b []byte, off int, f *Frame) error {
	switch f.Proto {
	case ProtoUDP:
		if len(b) < off+8 {
			return ErrShort
		}
		if l := int(binary.BigEndian.Uint16(b[off+4:])); l < 8 || off+l > len(b) {
			return ErrMalformed
		}
	case ProtoTCP:
		if len(b) < off+20 {
			return ErrShort
		}
		if d := int(b[off+12]>>4) * 4; d < 20 || off+d > len(b) {
			return ErrMalformed
		}
	case ProtoICMP, ProtoICMPv6:
		if len(b) < off+4 {
			return ErrShort
		}
		f.L4 = off
		f.ICMPType = b[off]
		return nil
	default:
		return nil
	}
	f.L4 = off
	f.SrcPort = binary.BigEndian.Uint16(b[off:])
	f.DstPort = binary.BigEndian.Uint16(b[off+2:])
	return nil
}

// DecTTL decrements the IPv4 TTL or IPv6 hop limit of a parsed frame,
// updating the IPv4 header checksum incrementally. It returns false, and
// changes nothing, when the TTL is 1 or 0: the packet must not be
// forwarded (the kernel answers with ICMP time exceeded).
func DecTTL(b []byte, f *Frame) bool {
	if f.L3 == 0 || f.TTL <= 1 {
		return false
	}
	ip := b[f.L3:]
	switch f.EtherType {
	case EtherTypeIPv4:
		old := binary.BigEndian.Uint16(ip[8:]) // TTL and protocol
		ip[8]--
		sum := binary.BigEndian.Uint16(ip[10:])
		binary.BigEndian.PutUint16(ip[10:], csum.Update16(sum, old, binary.BigEndian.Uint16(ip[8:])))
	case EtherTypeIPv6:
		ip[7]--
	default:
		return false
	}
	f.TTL--
	return true
}

// SetMACs writes the destination and source Ethernet addresses.
func SetMACs(b []byte, dst, src [6]byte) {
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
}
