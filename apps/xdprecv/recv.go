package main

import (
	"golang.org/x/sys/cpu"

	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
)

// receiver checks one queue's packets. Its counters are written by the
// queue's goroutine only; the pads keep them out of other queues' cache
// lines.
type receiver struct {
	_    cpu.CacheLinePad
	pat  []byte
	flat []byte // a multi-buffer packet, gathered
	fr   pkt.Frame
	next []uint64 // next expected sequence number per flow; 0 = not seen yet (stored +1)
	// win is, per flow, which of the 64 sequence numbers up to the
	// highest seen (next-2) arrived: bit k for next-2-k. A late arrival
	// whose bit is set is a duplicate.
	win    []uint64
	proto  *protoCounters // traffic other than xdpgen's UDP
	flows  int
	count  uint64
	stop   func()
	pcap   *pcapWriter
	ttlMin int
	ttlMax int
	lat    *latency // -latency; nil without

	packets, bytes, valid              atomic.Uint64
	ready                              func() // called after the poller's first round
	readyDone                          atomic.Bool
	gaps, late, badIP, badUDP, badData atomic.Uint64
	dups                               atomic.Uint64 // late arrivals of a sequence number already seen
	partialUDP                         atomic.Uint64
	other, pcapN                       atomic.Uint64
	_                                  cpu.CacheLinePad
}

// lost is what the summary calls lost: sequence numbers skipped less
// those that came late and were not duplicates (reordered), at least 0.
func (r *receiver) lost() uint64 {
	dups := r.dups.Load()
	late := r.late.Load() // before gaps: a late arrival follows its gap
	if late >= dups {
		late -= dups
	}
	if g := r.gaps.Load(); g > late {
		return g - late
	}
	return 0
}

// drops is the status line's running count of lost and bad datagrams:
// a reordered datagram is not among them.
func (r *receiver) drops() uint64 {
	return r.lost() + r.badIP.Load() + r.badUDP.Load() + r.badData.Load()
}

// EndRound says "ready" after the poller's first round, when the Fill
// ring has its frames.
func (r *receiver) EndRound() {
	if !r.readyDone.Load() {
		r.readyDone.Store(true)
		if r.ready != nil {
			r.ready()
		}
	}
}

// Receive checks one packet on the poller's goroutine; it allocates nothing.
func (r *receiver) Receive(p *rxpath.Packet) {
	b := p.Data
	if len(p.Segments) > 1 {
		// A jumbo frame in a chain of buffers: checked as one.
		r.flat = r.flat[:0]
		for _, s := range p.Segments {
			r.flat = append(r.flat, s...)
		}
		b = r.flat
	}
	r.packets.Add(1)
	r.bytes.Add(uint64(p.Len))
	if r.pcap != nil {
		r.pcap.write(time.Now(), b)
		r.pcapN.Add(1)
	}
	if pkt.Parse(b, &r.fr) != nil {
		r.other.Add(1)
		return
	}
	if r.fr.Proto != pkt.ProtoUDP || r.fr.L4 == 0 || r.fr.Fragment ||
		r.fr.EtherType != pkt.EtherTypeIPv4 && r.fr.EtherType != pkt.EtherTypeIPv6 {
		if r.proto == nil || !r.proto.receive(b, &r.fr) {
			r.other.Add(1)
		}
		return
	}
	fr := &r.fr
	ip := b[fr.L3:]
	udp := b[fr.L4 : fr.L3+fr.IPLen]
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	udp = udp[:ulen]
	var ph uint32
	if fr.EtherType == pkt.EtherTypeIPv4 {
		if csum.Fold(csum.Sum(ip[:int(ip[0]&15)*4], 0)) != 0xffff {
			r.badIP.Add(1)
			return
		}
		ph = csum.PseudoHeaderIPv4(fr.Src.As4(), fr.Dst.As4(), pkt.ProtoUDP, uint16(ulen))
	} else {
		ph = csum.PseudoHeaderIPv6(fr.Src.As16(), fr.Dst.As16(), pkt.ProtoUDP, uint32(ulen))
	}
	switch csum.VerifyUDP(udp, ph) {
	case csum.Good:
	case csum.None:
		if fr.EtherType == pkt.EtherTypeIPv6 { // IPv6 requires a UDP checksum
			r.badUDP.Add(1)
			return
		}
	case csum.Partial:
		// An offloaded checksum that no device finished (a software
		// device's sender with tx-checksumming on): not corruption.
		// Counted apart, and the payload is still checked.
		r.partialUDP.Add(1)
	default:
		r.badUDP.Add(1)
		return
	}
	data := udp[8:]
	h, sent, stamped, ok := payload.ParseAny(data)
	if !ok {
		r.other.Add(1)
		return
	}
	if stamped {
		if !payload.CheckStamped(r.pat, data, h) {
			r.badData.Add(1)
			return
		}
		if r.lat != nil {
			r.lat.observe(p, sent)
		}
	} else if !payload.Check(r.pat, data, h) {
		r.badData.Add(1)
		return
	}
	ttl := int(fr.TTL)
	r.ttlMin, r.ttlMax = min(r.ttlMin, ttl), max(r.ttlMax, ttl)
	exp := r.next[h.Flow]
	switch {
	case exp == 0: // first packet of the flow
		r.flows++
		if h.Seq > 0 {
			r.gaps.Add(h.Seq)
		}
		r.next[h.Flow] = h.Seq + 2
		r.win[h.Flow] = 1
	case h.Seq+1 == exp:
		r.next[h.Flow] = exp + 1
		r.win[h.Flow] = r.win[h.Flow]<<1 | 1
	case h.Seq+1 > exp:
		r.gaps.Add(h.Seq + 1 - exp)
		r.next[h.Flow] = h.Seq + 2
		if sh := h.Seq + 2 - exp; sh < 64 {
			r.win[h.Flow] = r.win[h.Flow]<<sh | 1
		} else {
			r.win[h.Flow] = 1
		}
	default:
		r.late.Add(1)
		if k := exp - 2 - h.Seq; k < 64 {
			if r.win[h.Flow]&(1<<k) != 0 {
				r.dups.Add(1)
			} else {
				r.win[h.Flow] |= 1 << k
			}
		}
	}
	if v := r.valid.Add(1); r.count > 0 && v == r.count {
		r.stop()
	}
}
