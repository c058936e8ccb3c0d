package txpath

import (
	"encoding/binary"
	"fmt"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// SendFrame queues one Ethernet frame gathered from parts, copied with the
// policy's method (NT stores for NT, and for Offload from its threshold;
// ordinary stores otherwise). With opts.Checksum it then fills the
// checksums (see Options); the software sum reads the frame back from the
// UMEM, so for payloads that need a software checksum prefer SendUDP, or
// Next and Commit. A frame larger than one UMEM frame leaves as a chain
// when the socket is multi-buffer; its headers must lie in the first
// UMEM frame. It fails with ErrNoFrames or ErrRingFull, having queued
// nothing, when there is no room now.
func (s *Sender) SendFrame(opts Options, parts ...[]byte) error {
	pol, err := s.policy(opts.Policy)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return fmt.Errorf("%w: empty frame", ErrBadFrame)
	}
	k, err := s.chunks(n)
	if err != nil {
		return err
	}
	if err := s.room(k); err != nil {
		return err
	}
	segs := s.takeChain(k, n)
	mode := cpPlain
	switch {
	case pol == NT:
		mode = cpNT
	case pol == Offload && s.dec.NTFrom > 0 && n >= s.dec.NTFrom:
		mode = cpNT
	}
	s.gather(segs, 0, parts, mode, 0)
	var opt uint32
	if opts.Checksum {
		offload, err := s.fillChecksums(s.chain[0], segs, n, pol, !(k > 1 && s.swCsum))
		if err != nil {
			// Nothing queued: the frames go back to the cache.
			for i := k - 1; i >= 0; i-- {
				s.cache = append(s.cache, s.u.Base(s.chain[i]))
			}
			return err
		}
		if offload {
			opt = xsk.OptTxMetadata
		}
	}
	s.queueChain(k, n, opt)
	s.queued(k, n, opt != 0, mode == cpNT)
	s.autoFlush()
	return nil
}

// fillChecksums fills the IPv4 header checksum and the L4 checksum of the
// n-byte frame at addr, whose bytes are segs, under pol, and reports
// whether it requested offload (metadata written); offloadOK false makes
// it sum in software where it would offload.
func (s *Sender) fillChecksums(addr uint64, segs [][]byte, n int, pol Policy, offloadOK bool) (bool, error) {
	if pol == Plain {
		return false, fmt.Errorf("%w: plain fills no checksum", ErrPolicy)
	}
	h := segs[0]
	l3 := 12
	for tags := 0; ; tags++ {
		if len(h) < l3+2 {
			return false, fmt.Errorf("%w: %d bytes, no EtherType", ErrBadPacket, len(h))
		}
		et := binary.BigEndian.Uint16(h[l3:])
		if (et == 0x8100 || et == 0x88a8) && tags < 2 {
			l3 += 4
			continue
		}
		l3 += 2
		switch et {
		case 0x0800, 0x86dd:
		default:
			return false, fmt.Errorf("%w: EtherType %#04x", ErrBadPacket, et)
		}
		break
	}
	avail := n - l3 // IP bytes in the frame
	var (
		l4, seglen int
		proto      uint8
		pseudo     uint32
	)
	if len(h) < l3+1 {
		return false, fmt.Errorf("%w: no IP header", ErrBadPacket)
	}
	switch h[l3] >> 4 {
	case 4:
		if len(h) < l3+20 {
			return false, fmt.Errorf("%w: IPv4 header truncated", ErrBadPacket)
		}
		ip := h[l3:]
		ihl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		switch {
		case ihl < 20 || len(h) < l3+ihl:
			return false, fmt.Errorf("%w: IPv4 header length %d", ErrBadPacket, ihl)
		case total < ihl || total > avail:
			return false, fmt.Errorf("%w: IPv4 total length %d, the frame carries %d bytes of IP with a %d-byte header",
				ErrBadPacket, total, avail, ihl)
		case binary.BigEndian.Uint16(ip[6:])&0x3fff != 0:
			return false, fmt.Errorf("%w: IPv4 fragment", ErrBadPacket)
		}
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip[:ihl], 0))
		l4, seglen, proto = l3+ihl, total-ihl, ip[9]
		pseudo = csum.PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), proto, uint16(seglen))
	case 6:
		if len(h) < l3+40 {
			return false, fmt.Errorf("%w: IPv6 header truncated", ErrBadPacket)
		}
		ip := h[l3:]
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if plen == 0 || 40+plen > avail {
			return false, fmt.Errorf("%w: IPv6 payload length %d, the frame carries %d bytes of IP", ErrBadPacket, plen, avail)
		}
		l4, seglen, proto = l3+40, plen, ip[6]
		pseudo = csum.PseudoHeaderIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), proto, uint32(plen))
	default:
		return false, fmt.Errorf("%w: IP version %d", ErrBadPacket, h[l3]>>4)
	}
	var field int
	switch proto {
	case csum.ProtoUDP:
		if seglen < 8 || len(h) < l4+8 {
			return false, fmt.Errorf("%w: UDP header truncated", ErrBadPacket)
		}
		if ul := int(binary.BigEndian.Uint16(h[l4+4:])); ul != seglen {
			return false, fmt.Errorf("%w: UDP length %d, IP says %d", ErrBadPacket, ul, seglen)
		}
		field = 6
	case csum.ProtoTCP:
		if seglen < 20 || len(h) < l4+20 {
			return false, fmt.Errorf("%w: TCP header truncated", ErrBadPacket)
		}
		field = 16
	default:
		return false, fmt.Errorf("%w: IP protocol %d", ErrBadPacket, proto)
	}
	// The device sums from csum_start to the end of the frame: bytes after
	// the IP packet (Ethernet padding, a trailer) would enter the sum, so
	// such a frame is summed here instead.
	if l4+seglen != n {
		offloadOK = false
	}
	if offloadOK && (pol == Offload || (pol == NT && s.meta && s.dec.CanOffload)) {
		binary.BigEndian.PutUint16(h[l4+field:], csum.Fold(pseudo))
		md := s.u.TxMetadataAt(addr)
		md.Flags = umem.TxMetadataChecksum
		md.CsumStart = uint16(l4)
		md.CsumOffset = uint16(field)
		return true, nil
	}
	h[l4+field], h[l4+field+1] = 0, 0
	// Sum the segment [l4, l4+seglen) over the chain.
	sum, off, done := pseudo, 0, 0
	for _, seg := range segs {
		lo, hi := max(l4-off, 0), min(l4+seglen-off, len(seg))
		if lo < hi {
			sum = csum.Combine(sum, csum.Sum(seg[lo:hi], 0), done)
			done += hi - lo
		}
		off += len(seg)
	}
	c := csum.Finish(sum)
	if proto == csum.ProtoUDP {
		c = csum.FinishUDP(sum)
	}
	binary.BigEndian.PutUint16(h[l4+field:], c)
	return false, nil
}
