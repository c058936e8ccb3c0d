package pkt

import (
	"encoding/binary"

	"github.com/xdpkit/xdpkit/csum"
)

// ReplyTTL is the IPv4 TTL and IPv6 hop limit that ReplyUDP writes.
const ReplyTTL = 64

// Payload returns the UDP payload of a frame that Parse described as UDP
// (f.Proto == ProtoUDP with a transport header), as a slice of b; nil
// otherwise. Its length comes from the UDP header, which Parse checked.
func (f *Frame) Payload(b []byte) []byte {
	if f.Proto != ProtoUDP || f.L4 == 0 {
		return nil
	}
	n := int(binary.BigEndian.Uint16(b[f.L4+4:]))
	return b[f.L4+8 : f.L4+n]
}

// ReplyUDP rewrites the UDP datagram in b, which Parse described in f,
// into its reply, in place: the Ethernet source and destination swapped,
// the IP source and destination swapped, the ports swapped, the TTL or hop
// limit set to ReplyTTL, and the IPv4 header and UDP checksums computed
// again over the whole datagram (never carried over from the request).
// The payload is left as it is; change it before calling ReplyUDP, or
// call csum.FillFrame after changing it. It returns the length of the
// reply, f.L3 + f.IPLen (the frame without Ethernet padding), and updates
// f to describe it.
//
// The datagram must be whole: IPv4 not fragmented, IPv6 without extension
// headers (a routing header could not be reversed); otherwise ReplyUDP
// changes nothing and returns ErrNotUDP. It allocates nothing.
func ReplyUDP(b []byte, f *Frame) (int, error) {
	if f.Proto != ProtoUDP || f.L4 == 0 || f.Fragment {
		return 0, ErrNotUDP
	}
	ip := b[f.L3:]
	switch f.EtherType {
	case EtherTypeIPv4:
		ip[8] = ReplyTTL
		swap(ip[12:16], ip[16:20])
	case EtherTypeIPv6:
		if f.L4 != f.L3+40 {
			return 0, ErrNotUDP
		}
		ip[7] = ReplyTTL
		swap(ip[8:24], ip[24:40])
	default:
		return 0, ErrNotUDP
	}
	swap(b[0:6], b[6:12])
	swap(b[f.L4:f.L4+2], b[f.L4+2:f.L4+4])
	n := f.L3 + f.IPLen
	if err := csum.FillFrame(b[:n]); err != nil {
		return 0, err // Parse checked what FillFrame checks
	}
	f.Src, f.Dst = f.Dst, f.Src
	f.SrcPort, f.DstPort = f.DstPort, f.SrcPort
	f.TTL = ReplyTTL
	return n, nil
}

// swap exchanges the contents of two slices of equal length that do not
// overlap.
func swap(a, b []byte) {
	for i := range a {
		a[i], b[i] = b[i], a[i]
	}
}
