package xdpprog

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// Hand-built frames for the filter tests, and a reference model of the
// filter in Go that the program is checked against.

var (
	macA = []byte{0x02, 0, 0, 0, 0, 0xa}
	macB = []byte{0x02, 0, 0, 0, 0, 0xb}

	srcV4  = netip.MustParseAddr("198.18.0.1")
	dstV4  = netip.MustParseAddr("198.18.0.2")
	hostV4 = netip.MustParseAddr("198.18.0.6")
	srcV6  = netip.MustParseAddr("2001:db8::1")
	dstV6  = netip.MustParseAddr("2001:db8::2")
	hostV6 = netip.MustParseAddr("2001:db8::6")
)

// frame is a description of a test frame; bytes() renders it.
type frame struct {
	vlans     []uint16 // TPIDs of VLAN tags, outermost first
	etype     uint16
	v4        *ipv4Hdr
	v6        *ipv6Hdr
	l4        []byte // UDP/TCP/ICMP header and payload, or the ARP body
	trailing  int    // extra payload bytes after l4
	overrideL []byte // if set, the L3 payload verbatim (instead of l4)
}

type ipv4Hdr struct {
	version  uint8 // 4 unless set
	ihl      uint8 // 32-bit words, 5 unless set
	proto    uint8
	fragWord uint16 // flags (MF=0x2000, DF=0x4000) and offset
	dst      netip.Addr
}

type ipv6Hdr struct {
	version uint8 // 6 unless set
	next    uint8
	dst     netip.Addr
}

func (f frame) bytes() []byte {
	b := append(slices.Clone(macB), macA...)
	for i, tpid := range f.vlans {
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, uint16(100+i)) // VID
	}
	b = binary.BigEndian.AppendUint16(b, f.etype)
	payload := f.l4
	if f.overrideL != nil {
		payload = f.overrideL
	}
	payload = append(slices.Clone(payload), make([]byte, f.trailing)...)
	switch {
	case f.v4 != nil:
		h := f.v4
		ver, ihl := h.version, h.ihl
		if ver == 0 {
			ver = 4
		}
		if ihl == 0 {
			ihl = 5
		}
		hl := int(ihl) * 4
		if hl < 20 {
			hl = 20 // a bogus IHL still occupies the fixed header
		}
		ip := make([]byte, hl)
		ip[0] = ver<<4 | ihl&0xf
		binary.BigEndian.PutUint16(ip[2:], uint16(hl+len(payload)))
		binary.BigEndian.PutUint16(ip[6:], h.fragWord)
		ip[8] = 64
		ip[9] = h.proto
		s, d := srcV4.As4(), h.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		for i := 20; i < hl; i++ {
			ip[i] = 1 // NOP options
		}
		b = append(append(b, ip...), payload...)
	case f.v6 != nil:
		h := f.v6
		ver := h.version
		if ver == 0 {
			ver = 6
		}
		ip := make([]byte, 40)
		ip[0] = ver << 4
		binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
		ip[6] = h.next
		ip[7] = 64
		s, d := srcV6.As16(), h.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		b = append(append(b, ip...), payload...)
	default:
		b = append(b, payload...)
	}
	return b
}

func udpHdr(dport uint16) []byte {
	h := make([]byte, 8)
	binary.BigEndian.PutUint16(h[0:], 40000)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint16(h[4:], 8)
	return h
}

func tcpHdr(dport uint16) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], 40000)
	binary.BigEndian.PutUint16(h[2:], dport)
	h[12] = 5 << 4
	h[13] = 0x02 // SYN
	return h
}

func arpBody() []byte {
	b := []byte{0, 1, 8, 0, 6, 4, 0, 1}
	b = append(b, macA...)
	s := srcV4.As4()
	b = append(b, s[:]...)
	b = append(b, make([]byte, 6)...)
	d := dstV4.As4()
	return append(b, d[:]...)
}

// Constructors for the common shapes.
func udp4(dst netip.Addr, dport uint16) frame {
	return frame{etype: ethPIPv4, v4: &ipv4Hdr{proto: protoUDP, dst: dst}, l4: udpHdr(dport), trailing: 18}
}
func tcp4(dst netip.Addr, dport uint16) frame {
	return frame{etype: ethPIPv4, v4: &ipv4Hdr{proto: protoTCP, dst: dst}, l4: tcpHdr(dport), trailing: 6}
}
func udp6(dst netip.Addr, dport uint16) frame {
	return frame{etype: ethPIPv6, v6: &ipv6Hdr{next: protoUDP, dst: dst}, l4: udpHdr(dport), trailing: 10}
}
func tcp6(dst netip.Addr, dport uint16) frame {
	return frame{etype: ethPIPv6, v6: &ipv6Hdr{next: protoTCP, dst: dst}, l4: tcpHdr(dport), trailing: 3}
}
func arp() frame { return frame{etype: 0x0806, l4: arpBody()} }
func icmp4() frame {
	return frame{etype: ethPIPv4, v4: &ipv4Hdr{proto: 1, dst: dstV4}, l4: []byte{8, 0, 0, 0, 0, 1, 0, 1}, trailing: 56}
}

// neighSolicit is an ICMPv6 neighbour solicitation (type 135).
func neighSolicit() frame {
	body := []byte{135, 0, 0, 0, 0, 0, 0, 0}
	d := dstV6.As16()
	body = append(body, d[:]...)
	return frame{etype: ethPIPv6, v6: &ipv6Hdr{next: 58, dst: netip.MustParseAddr("ff02::1:ff00:2")}, l4: body}
}

func withVLAN(f frame, tpids ...uint16) frame { f.vlans = tpids; return f }

// refRedirect is the filter's specification written plainly in Go: does
// filter f send frame b to the socket?
func refRedirect(f *Filter, b []byte) bool {
	if f == nil {
		return true
	}
	n, err := newFilter(f)
	if err != nil {
		panic(err)
	}
	if len(b) < 14 {
		return false
	}
	etype := binary.BigEndian.Uint16(b[12:])
	l3 := 14
	if etype == ethP8021Q || etype == ethP8021AD {
		if len(b) < 18 {
			return false
		}
		etype = binary.BigEndian.Uint16(b[16:])
		l3 = 18
	}
	var proto uint8
	var l4 int
	switch {
	case etype == ethPIPv4 && n.v4():
		if len(b) < l3+20 || b[l3]>>4 != 4 || b[l3]&0xf < 5 {
			return false
		}
		proto = b[l3+9]
		if !(proto == protoUDP && n.udp4 || proto == protoTCP && n.tcp4) {
			return false
		}
		if slices.Contains(n.pass4, [4]byte(b[l3+16:l3+20])) {
			return false
		}
		if n.only != nil && !slices.Contains(n.only.v4, [4]byte(b[l3+16:l3+20])) {
			return false
		}
		frag := binary.BigEndian.Uint16(b[l3+6:])
		if len(n.ports) > 0 && frag&0x3fff != 0 {
			return false
		}
		if len(n.ports) == 0 && frag&0x1fff != 0 {
			return true
		}
		l4 = l3 + int(b[l3]&0xf)*4
	case etype == ethPIPv6 && n.v6():
		if len(b) < l3+40 || b[l3]>>4 != 6 {
			return false
		}
		proto = b[l3+6]
		if !(proto == protoUDP && n.udp6 || proto == protoTCP && n.tcp6) {
			return false
		}
		if slices.Contains(n.pass6, [16]byte(b[l3+24:l3+40])) {
			return false
		}
		if n.only != nil && !slices.Contains(n.only.v6, [16]byte(b[l3+24:l3+40])) {
			return false
		}
		l4 = l3 + 40
	default:
		return false
	}
	min := udpHdrLen
	if proto == protoTCP {
		min = tcpMinHdrLen
	}
	if len(b) < l4+min {
		return false
	}
	if len(n.ports) > 0 {
		return slices.Contains(n.ports, binary.BigEndian.Uint16(b[l4+2:]))
	}
	return true
}
