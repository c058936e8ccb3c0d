package main

import (
	"encoding/binary"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
)

// headerView is how many bytes of a multi-buffer packet's first buffer
// parse reads: Ethernet with two VLAN tags, IPv6 with extension headers
// or IPv4 with options, and the transport header.
const headerView = 256

// parse parses p's headers into f.fr. A single-buffer packet is parsed
// as it is. Of a multi-buffer (jumbo) packet only the first buffer is
// contiguous, and it holds the headers (the kernel's multi-buffer XDP and
// AF_XDP put the packet's start in the first buffer): parse reads a copy
// of its start whose IP length is cut to the copy, then checks the real
// IP length against the whole packet.
func (f *forwarder) parse(p *rxpath.Packet) error {
	if len(p.Segments) == 1 {
		return pkt.Parse(p.Data, &f.fr)
	}
	n := copy(f.hdrs[:], p.Data)
	h := f.hdrs[:n]
	l3, et := ipStart(h)
	if l3 == 0 {
		return pkt.Parse(h, &f.fr) // not IP: whatever Parse makes of it
	}
	ip := h[l3:]
	var total int
	var l4 int // the UDP header, when it follows the IP header at once
	switch et {
	case pkt.EtherTypeIPv4:
		total = int(binary.BigEndian.Uint16(ip[2:]))
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		if ip[9] == pkt.ProtoUDP {
			l4 = l3 + int(ip[0]&15)*4
		}
	case pkt.EtherTypeIPv6:
		total = 40 + int(binary.BigEndian.Uint16(ip[4:]))
		binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-40))
		if ip[6] == pkt.ProtoUDP {
			l4 = l3 + 40
		}
	}
	if l4 > 0 && l4+8 <= len(h) {
		// The UDP length covers the whole datagram too: cut it as well.
		// (Extension headers before a UDP header of a jumbo IPv6 packet
		// leave it uncut, and Parse then calls the packet malformed.)
		binary.BigEndian.PutUint16(h[l4+4:], uint16(len(h)-l4))
	}
	if total > p.Len-l3 || total <= len(ip) {
		return pkt.ErrMalformed
	}
	if err := pkt.Parse(h, &f.fr); err != nil {
		return err
	}
	f.fr.IPLen = total
	return nil
}

// ipStart returns the offset of the IP header of an Ethernet frame with
// up to two VLAN tags and its EtherType (0 when it is not IP, or too
// short).
func ipStart(b []byte) (int, uint16) {
	off := 12
	for tags := 0; ; tags++ {
		if len(b) < off+2 {
			return 0, 0
		}
		et := binary.BigEndian.Uint16(b[off:])
		off += 2
		switch {
		case (et == pkt.EtherTypeVLAN || et == pkt.EtherTypeQinQ) && tags < 2:
			off += 2
			continue
		case et == pkt.EtherTypeIPv4 && len(b) >= off+20, et == pkt.EtherTypeIPv6 && len(b) >= off+40:
			return off, et
		}
		return 0, 0
	}
}

// finishPartialChain is finishPartial for a multi-buffer packet p (parsed
// into f.fr), whose IP datagram runs on past its first buffer: it decides
// as csum.VerifyTransport would on the whole datagram (Partial: the field
// holds the pseudo-header sum and the datagram does not sum to a finished
// checksum; an IPv4 UDP field of 0 is "no checksum") and fills the field
// as csum.FillTransport would, summing the segment buffer by buffer. The
// checksum field must lie in the first buffer; an IPv6 packet with
// extension headers is left alone.
func (f *forwarder) finishPartialChain(p *rxpath.Packet) {
	fr := &f.fr
	b := p.Data[fr.L3:]
	field := f.checksumField()
	n := fr.IPLen - (fr.L4 - fr.L3) // the transport segment
	if field+2 > len(b) || n < 0 {
		return
	}
	pseudo, ok := f.pseudoHeader(n)
	if !ok {
		return
	}
	got := binary.BigEndian.Uint16(b[field:])
	if !holdsPseudo(got, pseudo) || got == 0 && fr.Proto == pkt.ProtoUDP && fr.EtherType == pkt.EtherTypeIPv4 {
		return
	}
	sum, done, skip := pseudo, 0, fr.L4
	for _, s := range p.Segments {
		if skip >= len(s) {
			skip -= len(s)
			continue
		}
		s = s[skip:min(len(s), skip+n-done)]
		skip = 0
		sum = csum.Combine(sum, csum.Sum(s, 0), done)
		if done += len(s); done == n {
			break
		}
	}
	if done != n || csum.Finish(sum) == 0 {
		return // shorter than its IP length (parse refuses that), or finished already
	}
	sum = csum.Add(sum, uint32(^got)) // as if the field were 0
	v := csum.Finish(sum)
	if fr.Proto == pkt.ProtoUDP {
		v = csum.FinishUDP(sum)
	}
	binary.BigEndian.PutUint16(b[field:], v)
	f.c.partialFinished.Add(1)
}
