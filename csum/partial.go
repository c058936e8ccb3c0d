package csum

import (
	"encoding/binary"
	"fmt"
)

// Verdict is what Verify found in a UDP or TCP checksum field.
//
// Unfinished checksums: a sender that offloads a UDP or TCP checksum (the kernel with
// tx-checksumming on, or AF_XDP TX metadata) writes the pseudo-header sum
// into the checksum field, folded and not complemented, and leaves the
// rest to the device (CHECKSUM_PARTIAL). A NIC finishes it. A software
// device (veth, netkit, tun/tap, macvlan, ipvlan, a bridge) does not: it
// passes the frame on as it is, marked "checksum to be trusted", so a
// kernel stack behind it accepts the frame, but an XDP program or an
// AF_XDP socket there reads the unfinished field. Verify then tells a
// partial checksum from a wrong one: a field that equals the pseudo-header
// sum is Partial (a wrong checksum has that value by chance once in 65535).
// A receiver that forwards or echoes such a frame to a device or host that
// does not trust it must finish the checksum first (FillTransport or
// FillFrame).
type Verdict uint8

const (
	// Good: the checksum verifies.
	Good Verdict = iota
	// None: UDP over IPv4 with a zero field, "no checksum" (RFC 768).
	None
	// Partial: the field holds the pseudo-header sum (folded, not
	// complemented): an offloaded checksum that no device finished.
	Partial
	// Bad: neither.
	Bad
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case Good:
		return "good"
	case None:
		return "none"
	case Partial:
		return "partial"
	case Bad:
		return "bad"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// VerifyTransport checks the UDP or TCP checksum of the IP packet p (IPv4
// or IPv6; the same packets as FillTransport, which it does not modify).
func VerifyTransport(p []byte) (Verdict, error) {
	seg, proto, pseudo, err := transport(p)
	if err != nil {
		return Bad, err
	}
	field := 6
	switch proto {
	case ProtoUDP:
		if len(seg) < 8 {
			return Bad, ErrTruncated
		}
		if p[0]>>4 == 4 && binary.BigEndian.Uint16(seg[6:]) == 0 {
			return None, nil
		}
	case ProtoTCP:
		if len(seg) < 20 {
			return Bad, ErrTruncated
		}
		field = 16
	default:
		return Bad, fmt.Errorf("%w: IP protocol %d", ErrUnsupported, proto)
	}
	return verdict(seg, field, pseudo), nil
}

// VerifyFrame is VerifyTransport for the IP packet in the Ethernet frame f
// (up to two VLAN tags).
func VerifyFrame(f []byte) (Verdict, error) {
	p, err := ipPayload(f)
	if err != nil {
		return Bad, err
	}
	return VerifyTransport(p)
}

// VerifyUDP checks the checksum of the UDP datagram seg (header and data,
// its length the UDP length) whose pseudo-header sum is pseudo
// (PseudoHeaderIPv4 or PseudoHeaderIPv6). A zero field is None: the caller
// decides whether that is allowed (IPv4) or not (IPv6).
func VerifyUDP(seg []byte, pseudo uint32) Verdict {
	if len(seg) < 8 {
		return Bad
	}
	if binary.BigEndian.Uint16(seg[6:]) == 0 {
		return None
	}
	return verdict(seg, 6, pseudo)
}

func verdict(seg []byte, field int, pseudo uint32) Verdict {
	if Finish(Sum(seg, pseudo)) == 0 {
		return Good
	}
	got, want := binary.BigEndian.Uint16(seg[field:]), Fold(pseudo)
	// 0 and 0xFFFF are the same ones'-complement number (and no other
	// pair of a value and its complement is).
	if got == want || got == 0 && want == 0xffff || got == 0xffff && want == 0 {
		return Partial
	}
	return Bad
}

// transport returns the UDP or TCP segment of the IP packet p, its
// protocol and its pseudo-header sum.
func transport(p []byte) (seg []byte, proto uint8, pseudo uint32, err error) {
	if len(p) < 1 {
		return nil, 0, 0, ErrTruncated
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return nil, 0, 0, ErrTruncated
		}
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:]))
		if ihl < 20 || total < ihl {
			return nil, 0, 0, fmt.Errorf("%w: IHL %d, total length %d", ErrUnsupported, ihl/4, total)
		}
		if len(p) < total {
			return nil, 0, 0, ErrTruncated
		}
		if binary.BigEndian.Uint16(p[6:])&0x3fff != 0 {
			return nil, 0, 0, fmt.Errorf("%w: IPv4 fragment", ErrUnsupported)
		}
		seg = p[ihl:total]
		return seg, p[9], PseudoHeaderIPv4([4]byte(p[12:16]), [4]byte(p[16:20]), p[9], uint16(len(seg))), nil
	case 6:
		if len(p) < 40 {
			return nil, 0, 0, ErrTruncated
		}
		plen := int(binary.BigEndian.Uint16(p[4:]))
		if plen == 0 {
			return nil, 0, 0, fmt.Errorf("%w: IPv6 payload length 0 (jumbogram?)", ErrUnsupported)
		}
		if len(p) < 40+plen {
			return nil, 0, 0, ErrTruncated
		}
		seg = p[40 : 40+plen]
		return seg, p[6], PseudoHeaderIPv6([16]byte(p[8:24]), [16]byte(p[24:40]), p[6], uint32(plen)), nil
	}
	return nil, 0, 0, fmt.Errorf("%w: IP version %d", ErrUnsupported, p[0]>>4)
}
