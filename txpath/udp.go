package txpath

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/nt"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// UDPFlow is a precomputed Ethernet + IPv4/IPv6 + UDP header template for
// one flow. Sending a datagram then costs a copy of the template, the
// payload copy, and a few additions for the lengths and checksums.
// A UDPFlow is read-only after NewUDPFlow and may be shared.
type UDPFlow struct {
	hdr    [62]byte // the headers, lengths and checksums zero
	hdrLen int      // 42 (IPv4) or 62 (IPv6)
	v6     bool
	// ipSum is the partial sum of the IPv4 header with total length and
	// checksum zero; pseudo the partial sum of the pseudo-header without
	// its length; udpSum pseudo plus the UDP ports.
	ipSum, pseudo, udpSum uint32
}

// UDPFlowConfig holds the optional header fields of a UDPFlow.
type UDPFlowConfig struct {
	TTL uint8 // IPv4 TTL / IPv6 hop limit; default 64
	TOS uint8 // IPv4 TOS / IPv6 traffic class
}

// NewUDPFlow builds the template for datagrams from src to dst (both IPv4
// or both IPv6; an IPv4-mapped IPv6 address counts as IPv4) between the
// given MAC addresses. IPv4 datagrams carry DF and IP ID 0. cfg may be nil.
func NewUDPFlow(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, cfg *UDPFlowConfig) (*UDPFlow, error) {
	if len(srcMAC) != 6 || len(dstMAC) != 6 {
		return nil, fmt.Errorf("%w: MAC addresses must be 6 bytes (got %d and %d)", ErrBadFlow, len(srcMAC), len(dstMAC))
	}
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	if !sa.IsValid() || !da.IsValid() || sa.Is4() != da.Is4() {
		return nil, fmt.Errorf("%w: addresses %v and %v", ErrBadFlow, src.Addr(), dst.Addr())
	}
	c := UDPFlowConfig{TTL: 64}
	if cfg != nil {
		c = *cfg
		if c.TTL == 0 {
			c.TTL = 64
		}
	}
	f := &UDPFlow{v6: sa.Is6()}
	h := f.hdr[:]
	copy(h[0:6], dstMAC)
	copy(h[6:12], srcMAC)
	var l4 []byte
	if !f.v6 {
		binary.BigEndian.PutUint16(h[12:], 0x0800)
		ip := h[14:34]
		ip[0], ip[1] = 0x45, c.TOS
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		ip[8], ip[9] = c.TTL, csum.ProtoUDP
		s4, d4 := sa.As4(), da.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		f.ipSum = csum.Sum(ip, 0)
		f.pseudo = csum.PseudoHeaderIPv4(s4, d4, csum.ProtoUDP, 0)
		f.hdrLen = 42
		l4 = h[34:42]
	} else {
		binary.BigEndian.PutUint16(h[12:], 0x86dd)
		ip := h[14:54]
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(c.TOS)<<20)
		ip[6], ip[7] = csum.ProtoUDP, c.TTL
		s6, d6 := sa.As16(), da.As16()
		copy(ip[8:24], s6[:])
		copy(ip[24:40], d6[:])
		f.pseudo = csum.PseudoHeaderIPv6(s6, d6, csum.ProtoUDP, 0)
		f.hdrLen = 62
		l4 = h[54:62]
	}
	binary.BigEndian.PutUint16(l4[0:], src.Port())
	binary.BigEndian.PutUint16(l4[2:], dst.Port())
	f.udpSum = csum.Sum(l4, f.pseudo)
	return f, nil
}

// HeaderLen is the length of the flow's headers: 42 (IPv4) or 62 (IPv6).
func (f *UDPFlow) HeaderLen() int { return f.hdrLen }

// MaxPayload is the largest payload of one datagram of the flow in a
// packet of at most mtu bytes of IP (the interface MTU).
func (f *UDPFlow) MaxPayload(mtu int) int { return mtu - (f.hdrLen - 14) }

// copy modes of a payload copy.
const (
	cpPlain = iota // builtin copy
	cpFused        // csum.CopyAndSum
	cpNT           // nt.Copy
	cpNTSum        // nt.Copy, then csum.Sum of the source
)

// SendUDP queues one UDP datagram of the flow whose payload is the
// concatenation of payload (gathered into the frame, no staging copy),
// with its checksums filled according to the policy (opts.Policy, or the
// Sender's). A datagram larger than one frame leaves as a chain of
// descriptors when the socket is multi-buffer. It fails with ErrNoFrames
// or ErrRingFull, having written nothing, when there is no room now.
func (s *Sender) SendUDP(f *UDPFlow, opts Options, payload ...[]byte) error {
	if f == nil || f.hdrLen == 0 {
		return fmt.Errorf("%w: nil or zero flow", ErrBadFlow)
	}
	pol, err := s.policy(opts.Policy)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	ulen := 8 + n
	if ulen > 65535-20 { // IPv4 total length and IPv6 payload length
		return fmt.Errorf("%w: UDP length %d", ErrTooBig, ulen)
	}
	plen := f.hdrLen + n
	if pol == Plain && f.v6 {
		return fmt.Errorf("%w: plain over IPv6 would send a zero UDP checksum", ErrPolicy)
	}
	k, err := s.chunks(plen)
	if err != nil {
		return err
	}
	if err := s.room(k); err != nil {
		return err
	}
	segs := s.takeChain(k, plen)

	// Headers, from the template.
	h := segs[0]
	copy(h[:f.hdrLen], f.hdr[:f.hdrLen])
	var l4off int
	if !f.v6 {
		tot := uint16(20 + ulen)
		binary.BigEndian.PutUint16(h[16:], tot)
		binary.BigEndian.PutUint16(h[24:], csum.Finish(csum.Add(f.ipSum, uint32(tot))))
		l4off = 34
	} else {
		binary.BigEndian.PutUint16(h[18:], uint16(ulen))
		l4off = 54
	}
	binary.BigEndian.PutUint16(h[l4off+4:], uint16(ulen))

	mode, offload := s.mode(pol, n, k)
	if s.auto && opts.Policy == Auto && k == 1 {
		mode = autoMode(s.autoCopy(n, offload))
	}
	sum := s.gather(segs, f.hdrLen, payload, mode, 0)
	var opt uint32
	switch {
	case offload:
		// The device sums from the UDP header to the end and stores the
		// complement; the field holds the pseudo-header sum, folded, not
		// complemented.
		binary.BigEndian.PutUint16(h[l4off+6:], csum.Fold(csum.Add(f.pseudo, uint32(ulen))))
		md := s.u.TxMetadataAt(s.chain[0])
		md.Flags = umem.TxMetadataChecksum
		md.CsumStart = uint16(l4off)
		md.CsumOffset = 6
		opt = xsk.OptTxMetadata
	case pol == Plain:
		h[l4off+6], h[l4off+7] = 0, 0
	default:
		// Pseudo-header length and UDP length field: ulen twice.
		hs := csum.Add(f.udpSum, 2*uint32(ulen))
		binary.BigEndian.PutUint16(h[l4off+6:], csum.FinishUDP(csum.Add(hs, sum)))
	}
	s.queueChain(k, plen, opt)
	s.queued(k, plen, offload, mode == cpNT || mode == cpNTSum)
	s.autoFlush()
	return nil
}

// mode picks the copy method for a payload of n bytes under pol and says
// whether the checksum is offloaded.
func (s *Sender) mode(pol Policy, n, k int) (mode int, offload bool) {
	if k > 1 && s.swCsum && (pol == Offload || pol == NT) {
		// The kernel's TX_SW_CSUM sums the first buffer of a chain only
		// (seen on Linux 6.18): sum in software instead.
		if pol == NT {
			return cpNTSum, false
		}
		return cpFused, false
	}
	switch pol {
	case Offload:
		if s.dec.NTFrom > 0 && n >= s.dec.NTFrom {
			return cpNT, true
		}
		return cpPlain, true
	case NT:
		if s.meta && s.dec.CanOffload {
			return cpNT, true
		}
		return cpNTSum, false
	case Plain:
		return cpPlain, false
	}
	return cpFused, false
}

// autoMode maps the method ChooseCopy picked to a copy mode of gather.
func autoMode(m Method) int {
	switch m {
	case MethodCopy:
		return cpPlain
	case MethodNT:
		return cpNT
	case MethodNTSum:
		return cpNTSum
	}
	return cpFused // MethodFused, and MethodCopySum, which the fused copy beats
}

// chunks returns how many frames a packet of plen bytes needs.
func (s *Sender) chunks(plen int) (int, error) {
	if plen > s.maxPacket {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", ErrTooBig, plen, s.maxPacket)
	}
	k := (plen + s.chunkCap - 1) / s.chunkCap
	if k > 1 && !s.sg {
		return 0, fmt.Errorf("%w: %d bytes need %d frames of %d and the socket is not multi-buffer (xsk.Config.MultiBuffer)",
			ErrTooBig, plen, k, s.chunkCap)
	}
	return max(k, 1), nil
}

// takeChain takes k frames (promised by room) for a packet of plen bytes
// and returns the writable segments, in s.segs; s.chain holds the
// packet addresses.
func (s *Sender) takeChain(k, plen int) [][]byte {
	for i := 0; i < k; i++ {
		a := s.take() + s.dataOff
		s.chain[i] = a
		l := min(plen, s.chunkCap)
		s.segs[i] = s.u.Frame(a)[:l]
		plen -= l
	}
	return s.segs[:k]
}

// queueChain appends the descriptors of the chain taken by takeChain.
func (s *Sender) queueChain(k, plen int, opt uint32) {
	for i := 0; i < k; i++ {
		d := xsk.Desc{Addr: s.chain[i], Len: uint32(len(s.segs[i]))}
		if i == 0 {
			d.Options |= opt
		}
		if i < k-1 {
			d.Options |= xsk.OptContd
		}
		s.descs = append(s.descs, d)
	}
}

// gather copies parts into the chain segs from byte off of the packet
// (off even relative to the start of the summed data), with the copy
// method mode, and returns the partial sum of the copied bytes (0 for the
// modes that do not sum) added to sum.
func (s *Sender) gather(segs [][]byte, off int, parts [][]byte, mode int, sum uint32) uint32 {
	seg, pos := 0, off
	for pos >= len(segs[seg]) && seg < len(segs)-1 {
		pos -= len(segs[seg])
		seg++
	}
	done := 0 // bytes copied so far: their parity decides the byte order
	for _, p := range parts {
		for len(p) > 0 {
			dst := segs[seg][pos:]
			if len(dst) == 0 {
				seg++
				pos = 0
				continue
			}
			m := min(len(dst), len(p))
			src := p[:m]
			switch mode {
			case cpPlain:
				copy(dst, src)
			case cpNT:
				nt.Copy(dst, src)
			case cpFused:
				if done&1 == 0 {
					sum = csum.CopyAndSum(dst, src, sum)
				} else {
					sum = csum.Combine(sum, csum.CopyAndSum(dst, src, 0), 1)
				}
			case cpNTSum:
				nt.Copy(dst, src)
				if done&1 == 0 {
					sum = csum.Sum(src, sum)
				} else {
					sum = csum.Combine(sum, csum.Sum(src, 0), 1)
				}
			}
			p = p[m:]
			pos += m
			done += m
		}
	}
	return sum
}
