package csum

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors of the Fill functions, matched with errors.Is.
var (
	// ErrTruncated: the packet is shorter than its headers say.
	ErrTruncated = errors.New("csum: packet truncated")
	// ErrUnsupported: not a packet the Fill functions handle (not IPv4 or
	// IPv6, not UDP or TCP, an IPv4 fragment, an IPv6 extension header or
	// jumbogram).
	ErrUnsupported = errors.New("csum: unsupported packet")
)

// IP protocol numbers of the transports the Fill functions handle.
const (
	ProtoTCP = 6
	ProtoUDP = 17
)

// PseudoHeaderIPv4 returns the partial sum of the IPv4 pseudo-header that
// UDP and TCP checksums cover (RFC 768, RFC 9293): source and destination
// address, protocol, and length, the UDP or TCP length (header and data)
// in bytes. To checksum a segment seg:
//
//	binary.BigEndian.PutUint16(seg[6:], 0) // UDP; TCP's field is at 16
//	c := csum.FinishUDP(csum.Sum(seg, csum.PseudoHeaderIPv4(src, dst, csum.ProtoUDP, uint16(len(seg)))))
func PseudoHeaderIPv4(src, dst [4]byte, proto uint8, length uint16) uint32 {
	s := uint32(src[0])<<8 | uint32(src[1])
	s += uint32(src[2])<<8 | uint32(src[3])
	s += uint32(dst[0])<<8 | uint32(dst[1])
	s += uint32(dst[2])<<8 | uint32(dst[3])
	return s + uint32(proto) + uint32(length)
}

// PseudoHeaderIPv6 returns the partial sum of the IPv6 pseudo-header of
// RFC 8200 section 8.1: source and destination address, the upper-layer
// packet length and the next header value (UDP, TCP or ICMPv6's).
func PseudoHeaderIPv6(src, dst [16]byte, proto uint8, length uint32) uint32 {
	var s uint32
	for i := 0; i < 16; i += 2 {
		s += uint32(src[i])<<8 | uint32(src[i+1])
		s += uint32(dst[i])<<8 | uint32(dst[i+1])
	}
	// At most 16*0x1FFFE + 0xFFFF + 0xFFFF + 0xFF: no overflow.
	return s + length>>16 + length&0xffff + uint32(proto)
}

// IPv4Header returns the header checksum of the IPv4 header at the start
// of hdr, options included (IHL from hdr[0]), computed as if the checksum
// field (bytes 10 and 11) were zero, ready to be stored there big-endian.
// hdr must hold the whole header; it panics otherwise, like a slice index
// out of range.
func IPv4Header(hdr []byte) uint16 {
	n := int(hdr[0]&0x0f) * 4
	h := hdr[:n:n]
	// Sum the whole header, then take the checksum field out again by
	// adding its complement (ones'-complement subtraction).
	s := Sum(h, 0)
	s = Add(s, uint32(^binary.BigEndian.Uint16(h[10:])))
	return Finish(s)
}

// FillIPv4 computes and stores the header checksum of the IPv4 packet p.
func FillIPv4(p []byte) error {
	if len(p) < 20 {
		return ErrTruncated
	}
	if p[0]>>4 != 4 {
		return fmt.Errorf("%w: IP version %d", ErrUnsupported, p[0]>>4)
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 {
		return fmt.Errorf("%w: IHL %d", ErrUnsupported, ihl/4)
	}
	if len(p) < ihl {
		return ErrTruncated
	}
	binary.BigEndian.PutUint16(p[10:], IPv4Header(p))
	return nil
}

// FillTransport computes and stores the UDP or TCP checksum of the IPv4 or
// IPv6 packet p (the version is read from p[0]), over the pseudo-header
// and the segment, applying FinishUDP's zero rule for UDP. The segment's
// length comes from the IP header (total length or payload length), so
// bytes after it, such as Ethernet padding, are ignored. IPv4 fragments and
// IPv6 extension headers are not handled (ErrUnsupported). The IPv4
// header checksum is left alone; see FillIPv4 and FillFrame.
func FillTransport(p []byte) error {
	if len(p) < 1 {
		return ErrTruncated
	}
	var (
		seg    []byte
		proto  uint8
		pseudo uint32
	)
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return ErrTruncated
		}
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:]))
		if ihl < 20 || total < ihl {
			return fmt.Errorf("%w: IHL %d, total length %d", ErrUnsupported, ihl/4, total)
		}
		if len(p) < total {
			return ErrTruncated
		}
		if binary.BigEndian.Uint16(p[6:])&0x3fff != 0 { // MF or fragment offset
			return fmt.Errorf("%w: IPv4 fragment", ErrUnsupported)
		}
		proto = p[9]
		seg = p[ihl:total]
		pseudo = PseudoHeaderIPv4([4]byte(p[12:16]), [4]byte(p[16:20]), proto, uint16(len(seg)))
	case 6:
		if len(p) < 40 {
			return ErrTruncated
		}
		plen := int(binary.BigEndian.Uint16(p[4:]))
		if plen == 0 {
			return fmt.Errorf("%w: IPv6 payload length 0 (jumbogram?)", ErrUnsupported)
		}
		if len(p) < 40+plen {
			return ErrTruncated
		}
		proto = p[6]
		seg = p[40 : 40+plen]
		pseudo = PseudoHeaderIPv6([16]byte(p[8:24]), [16]byte(p[24:40]), proto, uint32(plen))
	default:
		return fmt.Errorf("%w: IP version %d", ErrUnsupported, p[0]>>4)
	}
	switch proto {
	case ProtoUDP:
		if len(seg) < 8 {
			return ErrTruncated
		}
		seg[6], seg[7] = 0, 0
		binary.BigEndian.PutUint16(seg[6:], FinishUDP(Sum(seg, pseudo)))
	case ProtoTCP:
		if len(seg) < 20 {
			return ErrTruncated
		}
		seg[16], seg[17] = 0, 0
		binary.BigEndian.PutUint16(seg[16:], Finish(Sum(seg, pseudo)))
	default:
		return fmt.Errorf("%w: IP protocol %d", ErrUnsupported, proto)
	}
	return nil
}

// Ethernet types that FillFrame understands.
const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
)

// FillFrame fills every checksum of the Ethernet frame f in place: the
// IPv4 header checksum, and the UDP or TCP checksum over IPv4 or IPv6.
// Up to two VLAN tags (802.1Q, 802.1ad) are skipped.
func FillFrame(f []byte) error {
	p, err := ipPayload(f)
	if err != nil {
		return err
	}
	if p[0]>>4 == 4 {
		if err := FillIPv4(p); err != nil {
			return err
		}
	}
	return FillTransport(p)
}

// ipPayload returns the IP packet that the Ethernet frame f carries.
func ipPayload(f []byte) ([]byte, error) {
	off := 12
	for tags := 0; ; tags++ {
		if len(f) < off+2 {
			return nil, ErrTruncated
		}
		et := binary.BigEndian.Uint16(f[off:])
		switch {
		case (et == etherTypeVLAN || et == etherTypeQinQ) && tags < 2:
			off += 4
			continue
		case et == etherTypeIPv4 || et == etherTypeIPv6:
			p := f[off+2:]
			if len(p) < 1 {
				return nil, ErrTruncated
			}
			if v := p[0] >> 4; (v == 4) != (et == etherTypeIPv4) || (v != 4 && v != 6) {
				return nil, fmt.Errorf("%w: IP version %d in EtherType %#04x", ErrUnsupported, v, et)
			}
			return p, nil
		default:
			return nil, fmt.Errorf("%w: EtherType %#04x", ErrUnsupported, et)
		}
	}
}
