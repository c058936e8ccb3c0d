package main

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
)

// Traffic other than xdpgen's UDP (-tcp, -ethertype, -all): TCP SYNs (a
// SYN scanner's, xdpgen -mode tcp-syn), ICMP and ICMPv6 echo requests and
// replies, and frames of other EtherTypes. Each is counted by kind, its
// checksums are verified (IPv4 header, TCP, ICMP, ICMPv6 with its
// pseudo-header), and its flows are counted: distinct (source, destination,
// ports) for TCP, (source, destination, identifier) for echoes.

const (
	protoICMPv6 = 58
	// maxRawTypes is how many EtherTypes the raw counters tell apart;
	// frames of further types are counted in rawOther.
	maxRawTypes = 16
	// flowSlots is the size of the open-addressing table of flow hashes;
	// flows beyond three quarters of it are not counted (flowsFull).
	flowSlots = 1 << 14
)

// ICMP and ICMPv6 echo types.
const (
	icmpEchoReply     = 0
	icmpEchoRequest   = 8
	icmpv6EchoRequest = 128
	icmpv6EchoReply   = 129
)

// protoCounters are one queue's counters of non-UDP traffic. The queue's
// goroutine writes them; the -json stream reads them while it runs.
type protoCounters struct {
	tcpSYN, tcpSYNACK, tcpOther, tcpBad, tcpPartial atomic.Uint64
	echoReq4, echoRep4, echoReq6, echoRep6          atomic.Uint64
	icmpOther, icmpBad                              atomic.Uint64
	raw                                             [maxRawTypes]atomic.Uint64
	rawType                                         [maxRawTypes]atomic.Uint32 // 0: slot free
	rawOther                                        atomic.Uint64
	synFlows, echoFlows                             atomic.Uint64
	flowsFull                                       atomic.Bool

	flows  []uint64 // flow hashes, 0 = empty; only the queue's goroutine
	nflows int
	key    [40]byte
}

func newProtoCounters() *protoCounters {
	return &protoCounters{flows: make([]uint64, flowSlots)}
}

// receive counts b, whose parse is fr, when it is not UDP. It returns
// false for a frame it does not count (then the caller counts it as
// other).
func (pc *protoCounters) receive(b []byte, fr *pkt.Frame) bool {
	switch fr.EtherType {
	case pkt.EtherTypeIPv4, pkt.EtherTypeIPv6:
	default:
		pc.rawFrame(fr.EtherType)
		return true
	}
	if fr.L4 == 0 || fr.Fragment {
		return false
	}
	v4 := fr.EtherType == pkt.EtherTypeIPv4
	seg := b[fr.L4 : fr.L3+fr.IPLen]
	switch {
	case fr.Proto == pkt.ProtoTCP:
		if v4 && !ipv4HeaderOK(b[fr.L3:]) {
			pc.tcpBad.Add(1)
			return true
		}
		switch tcpChecksum(seg, fr) {
		case csum.Good:
		case csum.Partial:
			pc.tcpPartial.Add(1)
		default:
			pc.tcpBad.Add(1)
			return true
		}
		switch flags := seg[13]; {
		case flags&0x12 == 0x02: // SYN without ACK
			pc.tcpSYN.Add(1)
			if pc.newFlow(fr, 6, fr.SrcPort, fr.DstPort) {
				pc.synFlows.Add(1)
			}
		case flags&0x12 == 0x12:
			pc.tcpSYNACK.Add(1)
		default:
			pc.tcpOther.Add(1)
		}
		return true
	case v4 && fr.Proto == pkt.ProtoICMP:
		if !ipv4HeaderOK(b[fr.L3:]) || csum.Fold(csum.Sum(seg, 0)) != 0xffff {
			pc.icmpBad.Add(1)
			return true
		}
		switch fr.ICMPType {
		case icmpEchoRequest:
			pc.echo(&pc.echoReq4, fr, seg)
		case icmpEchoReply:
			pc.echo(&pc.echoRep4, fr, seg)
		default:
			pc.icmpOther.Add(1)
		}
		return true
	case !v4 && fr.Proto == protoICMPv6:
		ph := csum.PseudoHeaderIPv6(fr.Src.As16(), fr.Dst.As16(), protoICMPv6, uint32(len(seg)))
		if csum.Fold(csum.Sum(seg, ph)) != 0xffff {
			pc.icmpBad.Add(1)
			return true
		}
		switch fr.ICMPType {
		case icmpv6EchoRequest:
			pc.echo(&pc.echoReq6, fr, seg)
		case icmpv6EchoReply:
			pc.echo(&pc.echoRep6, fr, seg)
		default:
			pc.icmpOther.Add(1)
		}
		return true
	}
	return false
}

func ipv4HeaderOK(ip []byte) bool {
	return csum.Fold(csum.Sum(ip[:int(ip[0]&15)*4], 0)) == 0xffff
}

// tcpChecksum verifies the TCP checksum of seg: Good, Partial (the field
// holds the pseudo-header sum: offloaded and never finished) or Bad.
func tcpChecksum(seg []byte, fr *pkt.Frame) csum.Verdict {
	var ph uint32
	if fr.EtherType == pkt.EtherTypeIPv4 {
		ph = csum.PseudoHeaderIPv4(fr.Src.As4(), fr.Dst.As4(), pkt.ProtoTCP, uint16(len(seg)))
	} else {
		ph = csum.PseudoHeaderIPv6(fr.Src.As16(), fr.Dst.As16(), pkt.ProtoTCP, uint32(len(seg)))
	}
	if csum.Fold(csum.Sum(seg, ph)) == 0xffff {
		return csum.Good
	}
	// As csum.VerifyUDP: the field holds the pseudo-header sum (0 and
	// 0xffff are the same ones'-complement number).
	got, want := binary.BigEndian.Uint16(seg[16:]), csum.Fold(ph)
	if got == want || got == 0 && want == 0xffff || got == 0xffff && want == 0 {
		return csum.Partial
	}
	return csum.Bad
}

func (pc *protoCounters) echo(n *atomic.Uint64, fr *pkt.Frame, seg []byte) {
	n.Add(1)
	if len(seg) >= 8 && pc.newFlow(fr, fr.ICMPType, binary.BigEndian.Uint16(seg[4:]), 0) {
		pc.echoFlows.Add(1)
	}
}

func (pc *protoCounters) rawFrame(et uint16) {
	for i := range pc.rawType {
		switch uint16(pc.rawType[i].Load()) {
		case et:
			pc.raw[i].Add(1)
			return
		case 0:
			pc.rawType[i].Store(uint32(et))
			pc.raw[i].Add(1)
			return
		}
	}
	pc.rawOther.Add(1)
}

// newFlow reports whether the flow (addresses, kind, a and b) is new,
// remembering it. It allocates nothing: a 64-bit FNV-1a hash in a fixed
// open-addressing table; once three quarters full, no flow is new.
func (pc *protoCounters) newFlow(fr *pkt.Frame, kind uint8, a, b uint16) bool {
	k := pc.key[:]
	s, d := fr.Src.As16(), fr.Dst.As16()
	copy(k, s[:])
	copy(k[16:], d[:])
	k[32] = kind
	binary.BigEndian.PutUint16(k[33:], a)
	binary.BigEndian.PutUint16(k[35:], b)
	h := uint64(14695981039346656037)
	for _, c := range k[:37] {
		h ^= uint64(c)
		h *= 1099511628211
	}
	if h == 0 {
		h = 1
	}
	mask := uint64(len(pc.flows) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch pc.flows[i] {
		case h:
			return false
		case 0:
			if pc.nflows >= len(pc.flows)*3/4 {
				pc.flowsFull.Store(true)
				return false
			}
			pc.flows[i] = h
			pc.nflows++
			return true
		}
	}
}

// ProtoSummary counts what is not xdpgen's UDP, summed over the queues.
type ProtoSummary struct {
	TCPSYN      uint64 // SYNs without ACK
	TCPSYNACK   uint64
	TCPOther    uint64
	TCPSYNFlows uint64 // distinct (addresses, ports) of the SYNs
	// TCPBadCsum counts TCP segments with a bad TCP or IPv4 header
	// checksum; TCPPartialCsum those whose checksum field holds the
	// pseudo-header sum (counted further, as for UDP).
	TCPBadCsum, TCPPartialCsum uint64
	ICMPEchoRequest            uint64
	ICMPEchoReply              uint64
	ICMPv6EchoRequest          uint64
	ICMPv6EchoReply            uint64
	ICMPEchoFlows              uint64 // distinct (addresses, type, identifier) of the echoes
	ICMPOther                  uint64
	ICMPBadCsum                uint64 // bad ICMP, ICMPv6 or IPv4 header checksums
	// Raw counts frames by EtherType ("0x88b5"), those of neither IPv4 nor
	// IPv6; RawOther those beyond the first 16 EtherTypes seen on a queue.
	Raw      map[string]uint64 `json:",omitempty"`
	RawOther uint64
	// FlowsFull says the flow tables filled: the flow counts are lower
	// bounds.
	FlowsFull bool
}

// add sums pc into s.
func (s *ProtoSummary) add(pc *protoCounters) {
	s.TCPSYN += pc.tcpSYN.Load()
	s.TCPSYNACK += pc.tcpSYNACK.Load()
	s.TCPOther += pc.tcpOther.Load()
	s.TCPSYNFlows += pc.synFlows.Load()
	s.TCPBadCsum += pc.tcpBad.Load()
	s.TCPPartialCsum += pc.tcpPartial.Load()
	s.ICMPEchoRequest += pc.echoReq4.Load()
	s.ICMPEchoReply += pc.echoRep4.Load()
	s.ICMPv6EchoRequest += pc.echoReq6.Load()
	s.ICMPv6EchoReply += pc.echoRep6.Load()
	s.ICMPEchoFlows += pc.echoFlows.Load()
	s.ICMPOther += pc.icmpOther.Load()
	s.ICMPBadCsum += pc.icmpBad.Load()
	for i := range pc.rawType {
		et := pc.rawType[i].Load()
		if et == 0 {
			break
		}
		if s.Raw == nil {
			s.Raw = map[string]uint64{}
		}
		s.Raw[fmt.Sprintf("%#04x", et)] += pc.raw[i].Load()
	}
	s.RawOther += pc.rawOther.Load()
	s.FlowsFull = s.FlowsFull || pc.flowsFull.Load()
}

// sub returns s - prev, field by field (for the -json stream's
// intervals); FlowsFull is s's.
func (s *ProtoSummary) sub(prev *ProtoSummary) ProtoSummary {
	d := ProtoSummary{
		TCPSYN: s.TCPSYN - prev.TCPSYN, TCPSYNACK: s.TCPSYNACK - prev.TCPSYNACK, TCPOther: s.TCPOther - prev.TCPOther,
		TCPSYNFlows: s.TCPSYNFlows - prev.TCPSYNFlows, TCPBadCsum: s.TCPBadCsum - prev.TCPBadCsum,
		TCPPartialCsum:  s.TCPPartialCsum - prev.TCPPartialCsum,
		ICMPEchoRequest: s.ICMPEchoRequest - prev.ICMPEchoRequest, ICMPEchoReply: s.ICMPEchoReply - prev.ICMPEchoReply,
		ICMPv6EchoRequest: s.ICMPv6EchoRequest - prev.ICMPv6EchoRequest, ICMPv6EchoReply: s.ICMPv6EchoReply - prev.ICMPv6EchoReply,
		ICMPEchoFlows: s.ICMPEchoFlows - prev.ICMPEchoFlows, ICMPOther: s.ICMPOther - prev.ICMPOther,
		ICMPBadCsum: s.ICMPBadCsum - prev.ICMPBadCsum, RawOther: s.RawOther - prev.RawOther, FlowsFull: s.FlowsFull,
	}
	for k, v := range s.Raw {
		if n := v - prev.Raw[k]; n > 0 {
			if d.Raw == nil {
				d.Raw = map[string]uint64{}
			}
			d.Raw[k] = n
		}
	}
	return d
}
