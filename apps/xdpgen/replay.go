package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/pcapfile"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/pkt"
)

// replay streams the packets of a pcap or pcapng file, -loop times, with
// MACs and, optionally, IP addresses rewritten in the reader's buffer.
type replay struct {
	path     string
	f        *os.File
	r        *pcapfile.Reader
	loops    int // 0: until stopped
	loop     int // loops begun
	original bool

	cur       []byte // the next packet, rewritten; nil: none read
	due       time.Duration
	ts0       int64
	loopStart time.Time
	first     bool // cur is the first packet of its loop

	macs     bool
	dst, src [6]byte
	ips      bool
	src4     [4]byte
	dst4     [4]byte
	src6     [16]byte
	dst6     [16]byte
	maxLen   int // the longest frame that fits one UMEM frame
	mtuLen   int // the MTU plus the Ethernet header

	skipped uint64 // records not sent: not Ethernet, or too long (tooLong)
	got     int    // packets taken from the file in this loop
}

// errEmpty is the error of a file with no packet to send.
var errEmpty = errors.New("no Ethernet packet to send in the file")

// openReplay opens c.pcap; records longer than maxLen bytes, or than the
// MTU allows (tooLong), are skipped.
func openReplay(c *config, maxLen int) (*replay, error) {
	f, err := os.Open(c.pcap)
	if err != nil {
		return nil, err
	}
	r, err := pcapfile.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("-pcap %s: %w", c.pcap, err)
	}
	rp := &replay{path: c.pcap, f: f, r: r, loops: c.loops, original: c.pcapTiming == "original",
		macs: !c.keepMACs, ips: c.rewriteIP, maxLen: maxLen, mtuLen: c.mtu + 14, loop: 1, first: true}
	copy(rp.src[:], c.ifaceMAC)
	copy(rp.dst[:], c.nextMAC)
	if rp.ips {
		if c.srcAddr.Is4() {
			rp.src4, rp.dst4 = c.srcAddr.As4(), c.dstAddr.As4()
		} else {
			rp.src6, rp.dst6 = c.srcAddr.As16(), c.dstAddr.As16()
		}
	}
	return rp, nil
}

func (rp *replay) Close() error { return rp.f.Close() }

// peek returns the next packet to send and, with the capture's timing,
// when it is due from the start of its loop. io.EOF after the last loop.
func (rp *replay) peek() ([]byte, time.Duration, error) {
	for rp.cur == nil {
		p, err := rp.r.Next()
		if err == io.EOF {
			if rp.got == 0 {
				// Nothing to send in a whole pass: another would
				// find nothing either.
				return nil, 0, fmt.Errorf("-pcap %s: %w", rp.path, errEmpty)
			}
			if rp.loops != 0 && rp.loop >= rp.loops {
				return nil, 0, io.EOF
			}
			if _, err := rp.f.Seek(0, io.SeekStart); err != nil {
				return nil, 0, err
			}
			if err := rp.r.Reset(rp.f); err != nil {
				return nil, 0, fmt.Errorf("-pcap %s: %w", rp.path, err)
			}
			rp.loop++
			rp.first, rp.got = true, 0
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("-pcap %s: %w", rp.path, err)
		}
		if p.LinkType != pcapfile.LinkTypeEthernet || len(p.Data) < 14 || rp.tooLong(p.Data) {
			rp.skipped++
			continue
		}
		rp.rewrite(p.Data)
		rp.cur = p.Data
		rp.got++
		if rp.first {
			rp.ts0, rp.first = p.Time, false
			rp.loopStart = time.Time{} // set when the first packet goes
		}
		rp.due = time.Duration(p.Time - rp.ts0)
	}
	return rp.cur, rp.due, nil
}

// tooLong: frame b is longer than one UMEM frame, or than the MTU allows
// with a VLAN tag: the kernel forwards MTU+14+4 bytes at most
// (is_skb_forwardable), also with two tags, so a full-size QinQ frame
// would be dropped by the peer.
func (rp *replay) tooLong(b []byte) bool {
	limit := rp.mtuLen
	if len(b) >= 14 {
		if et := binary.BigEndian.Uint16(b[12:]); et == pkt.EtherTypeVLAN || et == pkt.EtherTypeQinQ {
			limit += 4
		}
	}
	return len(b) > min(limit, rp.maxLen)
}

// wait is how long after now the current packet is due with the
// capture's timing (0 or less: it is due). The first packet of a loop is
// due at once and sets the loop's start: a packet is never sent before
// its offset in the file from there.
func (rp *replay) wait(now time.Time) time.Duration {
	if !rp.original {
		return 0
	}
	if rp.loopStart.IsZero() {
		rp.loopStart = now.Add(-rp.due)
		return 0
	}
	return rp.loopStart.Add(rp.due).Sub(now)
}

// sent consumes the current packet.
func (rp *replay) sent() { rp.cur = nil }

// rewrite sets the MACs and, with -pcap-rewrite-ip, the IP addresses of
// an IP packet of the configured family, updating the IPv4 header
// checksum and the UDP, TCP or ICMPv6 checksum incrementally (RFC 1624),
// which is right also for a packet the capture truncated: only the
// headers it changes must be in the captured bytes, and the L4 checksum
// is updated when its field is.
func (rp *replay) rewrite(b []byte) {
	if rp.macs {
		copy(b[0:6], rp.dst[:])
		copy(b[6:12], rp.src[:])
	}
	if !rp.ips {
		return
	}
	et, l3, proto, l4sum, routed := ipHeaders(b)
	var old [32]byte
	switch {
	case et == pkt.EtherTypeIPv4 && rp.src4 != [4]byte{}:
		a := b[l3+12 : l3+20]
		copy(old[:8], a)
		copy(a[0:4], rp.src4[:])
		copy(a[4:8], rp.dst4[:])
		hc := binary.BigEndian.Uint16(b[l3+10:])
		binary.BigEndian.PutUint16(b[l3+10:], csum.Update(hc, old[:8], a))
		if l4sum > 0 && proto != pkt.ProtoICMPv6 {
			if s := binary.BigEndian.Uint16(b[l4sum:]); s != 0 || proto != pkt.ProtoUDP {
				s = csum.Update(s, old[:8], a)
				if s == 0 && proto == pkt.ProtoUDP {
					s = 0xffff
				}
				binary.BigEndian.PutUint16(b[l4sum:], s)
			}
		}
	case et == pkt.EtherTypeIPv6 && rp.src6 != [16]byte{}:
		a := b[l3+8 : l3+40]
		copy(old[:], a)
		copy(a[0:16], rp.src6[:])
		copy(a[16:32], rp.dst6[:])
		if l4sum > 0 {
			// With a routing header still to visit, the transport
			// checksum's destination is its final one, which stays.
			was, now := old[:], a
			if routed {
				was, now = old[:16], a[:16]
			}
			s := csum.Update(binary.BigEndian.Uint16(b[l4sum:]), was, now)
			if s == 0 && proto == pkt.ProtoUDP {
				s = 0xffff
			}
			binary.BigEndian.PutUint16(b[l4sum:], s)
		}
	}
}

// ipHeaders reads, from the captured bytes b of an Ethernet frame, what
// rewrite changes: the EtherType after up to two VLAN tags (0 when not
// IP or the fixed IP header is not captured whole), the offset of the IP
// header, the transport protocol, and the offset of the UDP, TCP or
// ICMPv6 checksum field (0: none, a fragment after the first, or not
// captured). The IP length fields are not checked against len(b): a
// capture with a snap length cuts packets short.
func ipHeaders(b []byte) (et uint16, l3 int, proto uint8, l4sum int, routed bool) {
	off := 12
	for tags := 0; ; tags++ {
		if len(b) < off+2 {
			return 0, 0, 0, 0, false
		}
		et = binary.BigEndian.Uint16(b[off:])
		if tags == 2 || et != pkt.EtherTypeVLAN && et != pkt.EtherTypeQinQ {
			break
		}
		off += 4
	}
	l3 = off + 2
	l4 := 0
	switch et {
	case pkt.EtherTypeIPv4:
		if len(b) < l3+20 || b[l3]>>4 != 4 || b[l3]&15 < 5 {
			return 0, 0, 0, 0, false
		}
		proto = b[l3+9]
		if binary.BigEndian.Uint16(b[l3+6:])&0x1fff == 0 { // the first fragment or none
			l4 = l3 + int(b[l3]&15)*4
		}
	case pkt.EtherTypeIPv6:
		if len(b) < l3+40 || b[l3]>>4 != 6 {
			return 0, 0, 0, 0, false
		}
		proto = b[l3+6]
		off := l3 + 40
		for i := 0; i < 8 && l4 == 0; i++ { // at most 8 extension headers
			switch proto {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if len(b) < off+2 || proto == 43 && len(b) < off+4 {
					return et, l3, proto, 0, false
				}
				// With segments left, the pseudo-header of the
				// transport checksum holds the routing header's
				// final destination, not the IPv6 header's
				// (RFC 8200 8.1).
				routed = routed || proto == 43 && b[off+3] != 0
				proto = b[off]
				off += (int(b[off+1]) + 1) * 8
			case 44: // fragment
				if len(b) < off+4 {
					return et, l3, proto, 0, false
				}
				proto = b[off]
				if binary.BigEndian.Uint16(b[off+2:])&0xfff8 != 0 {
					return et, l3, proto, 0, false // not the first fragment
				}
				off += 8
			default:
				l4 = off
			}
		}
	default:
		return 0, 0, 0, 0, false
	}
	if l4 > 0 {
		switch proto {
		case pkt.ProtoUDP:
			l4sum = l4 + 6
		case pkt.ProtoTCP:
			l4sum = l4 + 16
		case pkt.ProtoICMPv6: // its checksum covers the pseudo-header
			l4sum = l4 + 2
		}
	}
	if l4sum+2 > len(b) {
		l4sum = 0
	}
	return et, l3, proto, l4sum, routed
}
