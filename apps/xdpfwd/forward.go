package main

import (
	"golang.org/x/sys/cpu"

	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/nexthop"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// port is one interface the forwarder serves: its socket, XDP program,
// and the descriptors waiting to go out of it.
type port struct {
	name    string
	ifindex int
	mac     [6]byte
	addr4   netip.Addr // source of ICMP errors sent out of this port
	addr6   netip.Addr
	sock    *xsk.Socket
	prog    *xsk.Program
	pend    []xsk.Desc // kept frames of forwarded packets to put on the TX ring
	icmp    []xsk.Desc // ICMP errors built here, to put on the TX ring after pend
	comp    []uint64   // completions scratch

	// L2: the configured destination MAC of frames leaving here, or the
	// source MAC last seen arriving here.
	dst, learned       [6]byte
	hasDst, hasLearned bool

	inflight int // produced on the TX ring, not completed

	// software: the port is a software device (veth, ...), whose
	// senders' offloaded checksums arrive unfinished: the forwarder
	// finishes them, as the kernel's forwarding path would.
	software bool
}

// counters are updated by one queue's poller goroutine and read by the
// status line; the pads keep them out of other queues' cache lines.
// forwarded, bytes and icmpSent move when the TX ring takes the packets
// (flush); a packet the full TX ring refused is counted in txFull (or,
// for an ICMP error, icmpTXFull) instead.
type counters struct {
	_                                      cpu.CacheLinePad
	forwarded, bytes                       atomic.Uint64
	ttlExpired, icmpSent, icmpLimited      atomic.Uint64
	noRoute, noNeighbour, notRoutable      atomic.Uint64
	notIP, parseErrors, txFull, noRoomICMP atomic.Uint64
	icmpTXFull, partialFinished            atomic.Uint64
	policed                                atomic.Uint64 // dropped by -max-pps
	recycleErrors                          atomic.Uint64 // completion batches Recycle refused
	completed, recycled                    atomic.Uint64 // TX completions reaped; of them, taken by Recycle
	_                                      cpu.CacheLinePad
}

func (c *counters) drops() uint64 {
	return c.ttlExpired.Load() + c.noRoute.Load() + c.noNeighbour.Load() + c.notRoutable.Load() +
		c.notIP.Load() + c.parseErrors.Load() + c.txFull.Load() + c.policed.Load()
}

type forwarder struct {
	ready   func() // called once, at the end of the poller's first round
	started bool   // the first round ended
	l3      bool
	u       *umem.UMEM
	p       *rxpath.Poller // takes completed frames back while it runs (nil: the allocator does)
	ports   []*port
	cache   *nexthop.Cache
	batch   int
	pending int // descriptors in all ports' pend
	fr      pkt.Frame
	keep    []xsk.Desc
	hdrs    [headerView]byte // parse's copy of a jumbo packet's headers

	icmpRate   int
	icmpSecond int64
	icmpLeft   int

	// roundGot: Receive ran in this poll round (EndRound).
	roundGot bool
	// held: the previous EndRound kept its pending packets; this one
	// sends them (a packet waits at most one round).
	held bool

	// now is the clock of the round (unix nanoseconds) for the next-hop
	// cache, read at its first routed packet: one clock read per round,
	// not per packet.
	now    int64
	hasNow bool

	// police is -max-pps (nil: no limit).
	police   *policer
	policed  bool  // roundTAI read this round
	roundTAI int64 // CLOCK_TAI at the round's first packet without metadata

	c counters
}

// Receive handles one packet on the poller's goroutine; it allocates
// nothing.
func (f *forwarder) Receive(p *rxpath.Packet) {
	if f.police != nil {
		// The bucket is refilled by arrival time, the XDP program's
		// clock in the packet's metadata, so that packets that waited
		// on the RX ring while the forwarder was descheduled are not
		// taken for a burst; without metadata, by the round's time.
		ts, ok := p.XDPTime()
		if !ok {
			if !f.policed {
				f.roundTAI, f.policed = payload.TAINow(), true
			}
			ts = f.roundTAI
		}
		f.police.refill(ts)
		if !f.police.allow() {
			f.c.policed.Add(1) // the frame goes back to the Fill ring
			return
		}
	}
	f.roundGot = true
	in := f.ports[p.Index]
	f.handle(p, in)
	if f.pending >= f.batch {
		f.flush()
	}
}

// finishPartial finishes a UDP or TCP checksum that a sender behind a
// software device left partial (the field holds the pseudo-header sum,
// csum.Partial): the kernel would have finished it on the way out, and a
// receiver behind the forwarder is not told it is partial. A wrong
// checksum that happens to equal the pseudo-header sum (1 in 65535) is
// finished too. ip is the IP datagram of f.fr.
//
// Only a field that equals the pseudo-header sum can be partial, and the
// pseudo-header sum comes from the headers: a packet whose field differs
// (every finished checksum but 1 in 65535) is left without summing its
// payload, which would read every cache line of the packet.
func (f *forwarder) finishPartial(ip []byte) {
	if !f.mayBePartial(ip) {
		return
	}
	if v, err := csum.VerifyTransport(ip); err == nil && v == csum.Partial {
		if csum.FillTransport(ip) == nil {
			f.c.partialFinished.Add(1)
		}
	}
}

// mayBePartial reports whether the UDP or TCP checksum field of the IP
// datagram ip (parsed into f.fr, its transport header in ip) can hold the
// pseudo-header sum, as csum.VerifyTransport tells Partial from the rest.
// It is true for what it does not work out itself (IPv6 extension
// headers): VerifyTransport then decides.
func (f *forwarder) mayBePartial(ip []byte) bool {
	l4 := f.fr.L4 - f.fr.L3
	field := f.checksumField()
	if len(ip) < l4 || field+2 > len(ip) {
		return true
	}
	pseudo, ok := f.pseudoHeader(len(ip) - l4)
	if !ok {
		return true
	}
	return holdsPseudo(binary.BigEndian.Uint16(ip[field:]), pseudo)
}

// checksumField is the offset of f.fr's UDP or TCP checksum field from
// the start of its IP header.
func (f *forwarder) checksumField() int {
	if f.fr.Proto == pkt.ProtoTCP {
		return f.fr.L4 - f.fr.L3 + 16
	}
	return f.fr.L4 - f.fr.L3 + 6
}

// pseudoHeader returns the pseudo-header sum of f.fr's transport segment,
// n bytes long; ok is false for IPv6 with extension headers, which
// it does not walk.
func (f *forwarder) pseudoHeader(n int) (sum uint32, ok bool) {
	fr := &f.fr
	switch {
	case fr.EtherType == pkt.EtherTypeIPv4:
		return csum.PseudoHeaderIPv4(fr.Src.As4(), fr.Dst.As4(), fr.Proto, uint16(n)), true
	case fr.EtherType == pkt.EtherTypeIPv6 && fr.L4-fr.L3 == 40:
		return csum.PseudoHeaderIPv6(fr.Src.As16(), fr.Dst.As16(), fr.Proto, uint32(n)), true
	}
	return 0, false
}

// holdsPseudo reports whether a checksum field holding got can be partial:
// whether it equals the folded pseudo-header sum. 0 and 0xFFFF are the
// same ones'-complement number (and no other pair of a value and its
// complement is).
func holdsPseudo(got uint16, pseudo uint32) bool {
	want := csum.Fold(pseudo)
	return got == want || got == 0 && want == 0xffff || got == 0xffff && want == 0
}

// kickBatch is the fewest pending packets that a round which took
// packets sends: copy mode's TX budget, what one kick sends.
const kickBatch = 32

// EndRound sends what the round left pending: one TX batch and at most
// one kick per poll round (rxpath.RoundEnder). A round that took packets
// and leaves fewer than kickBatch pending keeps them for the next round,
// which the poller runs at once (it naps or sleeps only after an empty
// round): a kick costs a system call whatever it sends, and small rounds
// would make one per few packets. It keeps them once: the next round
// sends everything, as does an empty round.
func (f *forwarder) EndRound() {
	busy := f.roundGot
	f.roundGot = false
	if f.pending > 0 {
		if busy && !f.held && f.pending < kickBatch {
			f.held = true
		} else {
			f.held = false
			f.flush()
		}
	} else {
		f.held = false
		// Frames on a TX ring that the kernel has not taken (its copy
		// mode refused a kick while the device's queue was full, or
		// stopped at its TX budget): kick again at the end of every
		// round, also of an idle one, so that none waits for the next
		// packet to come in.
		for _, q := range f.ports {
			if q.sock.TX().Pending() > 0 {
				f.kick(q)
				f.reap(q)
			}
		}
	}
	f.hasNow, f.policed = false, false
	if !f.started {
		f.started = true
		if f.ready != nil {
			f.ready()
		}
	}
}

func (f *forwarder) handle(p *rxpath.Packet, in *port) {
	b := p.Data
	if p.Copied() {
		f.c.parseErrors.Add(1)
		return
	}
	if err := f.parse(p); err != nil {
		f.c.parseErrors.Add(1)
		return
	}
	fr := &f.fr
	var out *port
	var dst [6]byte
	if f.l3 {
		if fr.L3 == 0 {
			f.c.notIP.Add(1)
			return
		}
		if !fr.Dst.IsGlobalUnicast() || fr.Dst.IsLinkLocalUnicast() {
			f.c.notRoutable.Add(1) // multicast, link-local, ...: never routed
			return
		}
		if !f.hasNow {
			f.now, f.hasNow = time.Now().UnixNano(), true
		}
		hop, err := f.cache.Get(fr.Dst, f.now)
		if err != nil {
			if errors.Is(err, nexthop.ErrNoNeighbour) {
				f.c.noNeighbour.Add(1)
			} else {
				f.c.noRoute.Add(1)
			}
			return
		}
		for _, q := range f.ports {
			if q.ifindex == hop.LinkIndex {
				out = q
			}
		}
		if out == nil {
			f.c.noRoute.Add(1) // routed through an interface we do not serve
			return
		}
		if !pkt.DecTTL(b, fr) {
			f.c.ttlExpired.Add(1)
			f.timeExceeded(p, in)
			return
		}
		dst = hop.MAC
	} else {
		copy(in.learned[:], b[6:12])
		in.hasLearned = true
		out = in
		if len(f.ports) > 1 {
			out = f.ports[1-p.Index]
		}
		switch {
		case out.hasDst:
			dst = out.dst
		case out.hasLearned:
			dst = out.learned
		default:
			f.c.noNeighbour.Add(1) // nothing learned on the out-interface yet
			return
		}
	}
	if in.software && fr.L4 != 0 && !fr.Fragment && (fr.Proto == pkt.ProtoUDP || fr.Proto == pkt.ProtoTCP) {
		if fr.L3+fr.IPLen <= len(b) {
			f.finishPartial(b[fr.L3 : fr.L3+fr.IPLen])
		} else {
			f.finishPartialChain(p) // a multi-buffer packet: IPLen runs past p.Data
		}
	}
	pkt.SetMACs(b, dst, out.mac)
	out.pend = p.Keep(out.pend)
	f.pending++
}

// timeExceeded answers an expiring packet with ICMP (or ICMPv6) time
// exceeded, built in place in the packet's own frame and sent back out of
// the port it came in on.
func (f *forwarder) timeExceeded(p *rxpath.Packet, in *port) {
	now := time.Now().Unix()
	if now != f.icmpSecond {
		f.icmpSecond, f.icmpLeft = now, f.icmpRate
	}
	if f.icmpLeft <= 0 {
		f.c.icmpLimited.Add(1)
		return
	}
	fr := &f.fr
	v6 := fr.EtherType == pkt.EtherTypeIPv6
	src := in.addr4
	if v6 {
		src = in.addr6
	}
	if !src.IsValid() || !fr.Src.IsGlobalUnicast() || len(p.Segments) != 1 {
		// A multi-buffer packet's quote would be built from its first
		// buffer only: not answered.
		f.c.noRoomICMP.Add(1)
		return
	}
	f.keep = p.Keep(f.keep[:0])
	if len(f.keep) != 1 {
		f.c.noRoomICMP.Add(1)
		return
	}
	d := f.keep[0]
	buf := f.u.Frame(d.Addr)
	l3 := fr.L3
	hdr := 28 // IPv4 + ICMP
	quote := min(fr.IPLen, int(buf[l3]&15)*4+8)
	if v6 {
		hdr = 48
		quote = min(fr.IPLen, 1280-48)
	}
	quote = min(quote, len(buf)-l3-hdr)
	if quote < 28 {
		f.c.noRoomICMP.Add(1)
		f.u.Put(d.Addr)
		return
	}
	f.icmpLeft--
	copy(buf[l3+hdr:], buf[l3:l3+quote]) // memmove: the quote moves behind the new headers
	var srcMAC [6]byte
	copy(srcMAC[:], buf[6:12])
	pkt.SetMACs(buf, srcMAC, in.mac)
	ip := buf[l3:]
	if !v6 {
		clear(ip[:28])
		ip[0], ip[1] = 0x45, 0xc0
		binary.BigEndian.PutUint16(ip[2:], uint16(28+quote))
		ip[8], ip[9] = 64, pkt.ProtoICMP
		s4, d4 := src.As4(), fr.Src.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip[:20], 0))
		icmp := ip[20 : 28+quote]
		icmp[0] = 11 // time exceeded, code 0: TTL exceeded in transit
		binary.BigEndian.PutUint16(icmp[2:], csum.Checksum(icmp, 0))
	} else {
		clear(ip[:48])
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(8+quote))
		ip[6], ip[7] = pkt.ProtoICMPv6, 64
		s6, d6 := src.As16(), fr.Src.As16()
		copy(ip[8:24], s6[:])
		copy(ip[24:40], d6[:])
		icmp := ip[40 : 48+quote]
		icmp[0] = 3 // time exceeded, code 0
		ph := csum.PseudoHeaderIPv6(s6, d6, pkt.ProtoICMPv6, uint32(len(icmp)))
		binary.BigEndian.PutUint16(icmp[2:], csum.Checksum(icmp, ph))
	}
	d.Len = uint32(l3 + hdr + quote)
	d.Options = 0
	in.icmp = append(in.icmp, d)
	f.pending++
}

// flush puts every port's pending descriptors on its TX ring (forwarded
// packets, then ICMP errors), wakes the kernel, and gives completed frames
// back to the UMEM allocator.
func (f *forwarder) flush() {
	for _, q := range f.ports {
		if len(q.pend) == 0 && len(q.icmp) == 0 {
			f.reap(q)
			continue
		}
		if len(q.pend) > 0 {
			pkts, bytes, refused := f.produce(q, q.pend)
			f.c.forwarded.Add(pkts)
			f.c.bytes.Add(bytes)
			if refused > 0 {
				f.c.txFull.Add(refused)
			}
			q.pend = q.pend[:0]
		}
		if len(q.icmp) > 0 {
			pkts, _, refused := f.produce(q, q.icmp)
			f.c.icmpSent.Add(pkts)
			if refused > 0 {
				f.c.icmpTXFull.Add(refused)
			}
			q.icmp = q.icmp[:0]
		}
		f.kick(q)
		f.reap(q)
	}
	f.pending = 0
}

// produce puts descs on q's TX ring; when the ring is full it lets the
// kernel drain it and tries once more, then gives the frames of what
// still does not fit back to the UMEM. It returns the packets and bytes
// the ring took and the packets it refused.
func (f *forwarder) produce(q *port, descs []xsk.Desc) (pkts, bytes, refused uint64) {
	tx := q.sock.TX()
	n := tx.Produce(descs) // never splits a multi-buffer packet
	if n < len(descs) {
		f.kick(q)
		f.reap(q)
		n += tx.Produce(descs[n:])
	}
	q.inflight += n
	for _, d := range descs[:n] {
		bytes += uint64(d.Len)
		if d.Options&xsk.OptContd == 0 {
			pkts++
		}
	}
	for _, d := range descs[n:] {
		if d.Options&xsk.OptContd == 0 {
			refused++
		}
		_ = f.u.Put(d.Addr)
	}
	return pkts, bytes, refused
}

// kick wakes the kernel while it has descriptors to take (copy mode sends
// a bounded number per system call).
func (f *forwarder) kick(q *port) {
	tx := q.sock.TX()
	for i := 0; i < 64 && tx.Pending() > 0; i++ {
		if err := q.sock.KickTX(); err != nil {
			return // the link went away; Run's caller sees it at shutdown
		}
		if tx.Pending() > 0 {
			f.reap(q)
		}
	}
}

// reap gives completed frames back: while the poller runs, to its Fill
// ring in the order they completed (rxpath.Poller.Recycle), otherwise to
// the UMEM allocator. A batch that Recycle refuses (it then takes none)
// is counted in recycleErrors. After umem.ErrDoubleFree (a frame of the
// batch is on a Fill ring or with the poller already) its frames are
// offered to Recycle one by one, and only those it refuses as given back
// twice stay out: the allocator would hand them out a second time
// (Summary.AccountingOK tells). After any other error its frames go to
// the allocator one by one.
// completed counts every completion, recycled those Recycle took.
func (f *forwarder) reap(q *port) {
	for {
		n := q.sock.Completion().Consume(q.comp)
		if n == 0 {
			return
		}
		q.inflight -= n
		f.c.completed.Add(uint64(n))
		done := q.comp[:n]
		if f.p != nil {
			err := f.p.Recycle(f.u, done)
			if err == nil {
				f.c.recycled.Add(uint64(n))
				continue
			}
			if !errors.Is(err, rxpath.ErrNotRunning) {
				f.c.recycleErrors.Add(1)
				if errors.Is(err, umem.ErrDoubleFree) {
					f.recycleEach(done)
					continue
				}
				for _, a := range done {
					_ = f.u.Put(a)
				}
				continue
			}
		}
		_ = f.u.PutBatch(done)
	}
}

// recycleEach offers the frames of a batch that Recycle refused as a
// double free to it one at a time: the good ones still go back, a frame
// refused as given back twice stays out, one refused otherwise goes to
// the allocator.
func (f *forwarder) recycleEach(done []uint64) {
	for i := range done {
		switch err := f.p.Recycle(f.u, done[i:i+1]); {
		case err == nil:
			f.c.recycled.Add(1)
		case !errors.Is(err, umem.ErrDoubleFree):
			_ = f.u.Put(done[i])
		}
	}
}

// ownAddrs are every address of the namespace's interfaces: packets to
// them go to the kernel.
func ownAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	if len(out) > 256 {
		out = out[:256]
	}
	return out, nil
}

// ifaceAddrs returns the first global IPv4 and IPv6 address of ifi.
func ifaceAddrs(ifi *net.Interface) (a4, a6 netip.Addr) {
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || !p.Addr().IsGlobalUnicast() {
			continue
		}
		if p.Addr().Is4() && !a4.IsValid() {
			a4 = p.Addr()
		} else if p.Addr().Is6() && !a6.IsValid() {
			a6 = p.Addr()
		}
	}
	return a4, a6
}

var _ rxpath.RoundEnder = (*forwarder)(nil)
