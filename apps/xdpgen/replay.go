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
	maxLen   int

	fr      pkt.Frame
	skipped uint64 // records not sent: not Ethernet, or longer than maxLen
	got     int    // packets taken from the file in this loop
}

// errEmpty is the error of a file with no packet to send.
var errEmpty = errors.New("no Ethernet packet to send in the file")

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
		macs: !c.keepMACs, ips: c.rewriteIP, maxLen: maxLen, loop: 1, first: true}
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
		if p.LinkType != pcapfile.LinkTypeEthernet || len(p.Data) < 14 || len(p.Data) > rp.maxLen {
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

// wait is how long before the current packet is due with the capture's
// timing (0: now).
func (rp *replay) wait() time.Duration {
	if !rp.original {
		return 0
	}
	if rp.loopStart.IsZero() {
		rp.loopStart = time.Now().Add(-rp.due)
		return 0
	}
	return time.Until(rp.loopStart.Add(rp.due))
}

// sent consumes the current packet.
func (rp *replay) sent() { rp.cur = nil }

// rewrite sets the MACs and, with -pcap-rewrite-ip, the IP addresses of
// an IP packet of the configured family, updating the IPv4 header
// checksum and the UDP, TCP or ICMPv6 checksum incrementally (RFC 1624),
// which is right also for a packet the capture truncated.
func (rp *replay) rewrite(b []byte) {
	if rp.macs {
		copy(b[0:6], rp.dst[:])
		copy(b[6:12], rp.src[:])
	}
	if !rp.ips || pkt.Parse(b, &rp.fr) != nil {
		return
	}
	f := &rp.fr
	var old [32]byte
	var l4sum int // offset of the L4 checksum field, 0: none
	if f.L4 > 0 { // 0 for a fragment after the first
		switch f.Proto {
		case pkt.ProtoUDP:
			l4sum = f.L4 + 6
		case pkt.ProtoTCP:
			l4sum = f.L4 + 16
		case pkt.ProtoICMPv6: // ICMPv6: its checksum covers the pseudo-header
			l4sum = f.L4 + 2
		}
	}
	if l4sum+2 > len(b) {
		l4sum = 0
	}
	switch {
	case f.EtherType == pkt.EtherTypeIPv4 && f.Src.Is4() && rp.src4 != [4]byte{}:
		a := b[f.L3+12 : f.L3+20]
		copy(old[:8], a)
		copy(a[0:4], rp.src4[:])
		copy(a[4:8], rp.dst4[:])
		hc := binary.BigEndian.Uint16(b[f.L3+10:])
		binary.BigEndian.PutUint16(b[f.L3+10:], csum.Update(hc, old[:8], a))
		if l4sum > 0 && f.Proto != pkt.ProtoICMPv6 {
			if s := binary.BigEndian.Uint16(b[l4sum:]); s != 0 || f.Proto != pkt.ProtoUDP {
				s = csum.Update(s, old[:8], a)
				if s == 0 && f.Proto == pkt.ProtoUDP {
					s = 0xffff
				}
				binary.BigEndian.PutUint16(b[l4sum:], s)
			}
		}
	case f.EtherType == pkt.EtherTypeIPv6 && f.Src.Is6() && rp.src6 != [16]byte{}:
		a := b[f.L3+8 : f.L3+40]
		copy(old[:], a)
		copy(a[0:16], rp.src6[:])
		copy(a[16:32], rp.dst6[:])
		if l4sum > 0 {
			s := csum.Update(binary.BigEndian.Uint16(b[l4sum:]), old[:], a)
			if s == 0 && f.Proto == pkt.ProtoUDP {
				s = 0xffff
			}
			binary.BigEndian.PutUint16(b[l4sum:], s)
		}
	}
}
