package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/nexthop"
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
	pend    []xsk.Desc // kept frames to put on the TX ring
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

// counters are updated by the poller goroutine and read by the status line.
type counters struct {
	forwarded, bytes                       atomic.Uint64
	ttlExpired, icmpSent, icmpLimited      atomic.Uint64
	noRoute, noNeighbour, notRoutable      atomic.Uint64
	notIP, parseErrors, txFull, noRoomICMP atomic.Uint64
	partialFinished                        atomic.Uint64
}

func (c *counters) drops() uint64 {
	return c.ttlExpired.Load() + c.noRoute.Load() + c.noNeighbour.Load() + c.notRoutable.Load() +
		c.notIP.Load() + c.parseErrors.Load() + c.txFull.Load()
}

type forwarder struct {
	l3      bool
	u       *umem.UMEM
	ports   []*port
	cache   *nexthop.Cache
	batch   int
	pending int // descriptors in all ports' pend
	fr      pkt.Frame
	keep    []xsk.Desc

	icmpRate   int
	icmpSecond int64
	icmpLeft   int

	c counters
}

// Receive handles one packet on the poller's goroutine; it allocates
// nothing.
func (f *forwarder) Receive(p *rxpath.Packet) {
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
// finished too.
func (f *forwarder) finishPartial(ip []byte) {
	if v, err := csum.VerifyTransport(ip); err == nil && v == csum.Partial {
		if csum.FillTransport(ip) == nil {
			f.c.partialFinished.Add(1)
		}
	}
}

// EndRound sends what the round left pending: one TX batch and at most
// one kick per poll round (rxpath.RoundEnder).
func (f *forwarder) EndRound() {
	if f.pending > 0 {
		f.flush()
	}
}

func (f *forwarder) handle(p *rxpath.Packet, in *port) {
	b := p.Data
	if len(p.Segments) != 1 || p.Copied() {
		f.c.parseErrors.Add(1)
		return
	}
	if err := pkt.Parse(b, &f.fr); err != nil {
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
		hop, err := f.cache.Get(fr.Dst, time.Now().UnixNano())
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
		f.finishPartial(b[fr.L3 : fr.L3+fr.IPLen])
	}
	pkt.SetMACs(b, dst, out.mac)
	out.pend = p.Keep(out.pend)
	f.pending++
	f.c.forwarded.Add(1)
	f.c.bytes.Add(uint64(len(b)))
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
	if !src.IsValid() || !fr.Src.IsGlobalUnicast() {
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
	in.pend = append(in.pend, d)
	f.pending++
	f.c.icmpSent.Add(1)
}

// flush puts every port's pending descriptors on its TX ring, wakes the
// kernel, and gives completed frames back to the UMEM allocator.
func (f *forwarder) flush() {
	for _, q := range f.ports {
		if len(q.pend) == 0 {
			f.reap(q)
			continue
		}
		n := q.sock.TX().Produce(q.pend)
		if n < len(q.pend) {
			// The ring is full: let the kernel drain it, then try once more.
			f.kick(q)
			f.reap(q)
			n += q.sock.TX().Produce(q.pend[n:])
		}
		q.inflight += n
		if rest := q.pend[n:]; len(rest) > 0 {
			// Counted as forwarded when handled; they are dropped instead.
			f.c.txFull.Add(uint64(len(rest)))
			f.c.forwarded.Add(^uint64(len(rest) - 1))
			var bytes uint64
			for _, d := range rest {
				bytes += uint64(d.Len)
				_ = f.u.Put(d.Addr)
			}
			f.c.bytes.Add(^(bytes - 1))
		}
		q.pend = q.pend[:0]
		f.kick(q)
		f.reap(q)
	}
	f.pending = 0
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

func (f *forwarder) reap(q *port) {
	for {
		n := q.sock.Completion().Consume(q.comp)
		if n == 0 {
			return
		}
		q.inflight -= n
		_ = f.u.PutBatch(q.comp[:n])
	}
}

// Summary is xdpfwd's final report.
type Summary struct {
	Mode, In, Out   string
	AttachMode      string
	ZeroCopy        bool
	Seconds         float64
	Received        uint64 // packets taken off the RX rings
	Forwarded       uint64
	Bytes           uint64
	Mpps            float64
	TTLExpired      uint64
	ICMPSent        uint64
	ICMPRateLimited uint64
	ICMPNotSent     uint64
	NoRoute         uint64
	NoNeighbour     uint64
	NotRoutable     uint64
	NotIP           uint64
	ParseErrors     uint64
	TXRingFull      uint64
	PartialFinished uint64 // UDP/TCP checksums left partial by the sender, finished here
	RouteLookups    uint64
	XDP             []PortXDP
	Poller          string
	CPUSeconds      float64
	Accounting      string
	AccountingOK    bool
}

// PortXDP are one socket's kernel counters (XDP_STATISTICS).
type PortXDP struct {
	Iface                                         string
	RXDropped, RXRingFull, RXFillEmpty, TXInvalid uint64
}

func run(ctx context.Context, c *config) (*Summary, error) {
	f := &forwarder{l3: c.mode == "l3", batch: c.batch, icmpRate: c.icmpRate, keep: make([]xsk.Desc, 0, 4)}
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: uint32(c.frames)})
	if err != nil {
		return nil, err
	}
	f.u = u
	own, err := ownAddrs()
	if err != nil {
		u.Close()
		return nil, err
	}
	names := []string{c.in}
	if c.out != c.in {
		names = append(names, c.out)
	}
	var mode xsk.AttachMode
	switch strings.ToLower(c.xdpMode) {
	case "native":
		mode = xsk.AttachNative
	case "generic":
		mode = xsk.AttachGeneric
	default:
		mode = xsk.AttachAuto
	}
	var poller *rxpath.Poller
	cleanup := func() error {
		var errs []error
		for _, q := range f.ports {
			if q.prog != nil {
				errs = append(errs, q.prog.Close())
			}
		}
		for _, q := range f.ports {
			if q.sock != nil {
				errs = append(errs, q.sock.Close())
			}
		}
		if poller != nil {
			if _, err := poller.Reclaim(); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, poller.Close())
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*Summary, error) {
		cleanup()
		u.Close()
		return nil, err
	}
	for _, name := range names {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return fail(err)
		}
		q := &port{name: name, ifindex: ifi.Index, pend: make([]xsk.Desc, 0, 2*c.batch+8), comp: make([]uint64, 256)}
		copy(q.mac[:], ifi.HardwareAddr)
		q.addr4, q.addr6 = ifaceAddrs(ifi)
		f.ports = append(f.ports, q)
		sz := uint32(c.ring)
		q.sock, err = xsk.New(name, c.queue, u, &xsk.Config{RXSize: sz, TXSize: sz, FillSize: sz, CompletionSize: sz, MaxTXBudget: min(256, sz)})
		if err != nil {
			return fail(fmt.Errorf("socket on %s queue %d: %w", name, c.queue, err))
		}
		q.prog, err = xsk.AttachProgram(name, &xsk.ProgramConfig{Mode: mode, Filter: &xsk.Filter{
			IPv4UDP: true, IPv4TCP: true, IPv6UDP: true, IPv6TCP: true, PassDst: own,
		}})
		if err != nil {
			return fail(fmt.Errorf("XDP program on %s: %w", name, err))
		}
		if err := q.prog.Register(q.sock); err != nil {
			return fail(fmt.Errorf("register socket on %s: %w", name, err))
		}
	}
	if c.dstMAC != "" {
		out := f.ports[len(f.ports)-1]
		out.dst, out.hasDst = c.dstMACVal, true
	}
	if f.l3 {
		f.cache = nexthop.NewCache()
	}
	socks := make([]*xsk.Socket, len(f.ports))
	for i, q := range f.ports {
		socks[i] = q.sock
	}
	// Each Fill ring holds one ring's worth of frames; the rest of the
	// UMEM is for frames in flight on the TX rings.
	poller, err = rxpath.New(&rxpath.Config{CopyThreshold: -1, FillFrames: c.ring}, socks...)
	if err != nil {
		return fail(err)
	}
	sum := &Summary{Mode: c.mode, In: c.in, Out: c.out, AttachMode: f.ports[0].prog.Mode().String(), ZeroCopy: socks[0].ZeroCopy()}
	fmt.Printf("xdpfwd: ready: %s %s -> %s, queue %d, attach %s, zero-copy %v, %d frames\n",
		c.mode, c.in, c.out, c.queue, sum.AttachMode, sum.ZeroCopy, c.frames)
	for _, q := range f.ports {
		via := "bpf_link"
		if !q.prog.BPFLink() {
			via = "attached through rtnetlink (no XDP bpf_link: stays attached if killed)"
		}
		from := "?"
		if info, err := xsk.Device(q.name); err == nil {
			from = info.FeaturesFrom
			q.software, _ = info.SoftwareChecksum()
		}
		fmt.Printf("xdpfwd: %s: kernel features: %s; XDP %s; device facts from %s; finishes partial checksums %v\n",
			q.name, q.sock.Features(), via, from, q.software)
	}

	if c.metrics != "" {
		addr, err := cli.ServeMetrics(ctx, c.metrics, "xdpfwd", f.metrics(poller))
		if err != nil {
			return fail(err)
		}
		fmt.Printf("xdpfwd: metrics on http://%s/metrics\n", addr)
	}

	start := time.Now()
	cpu0 := cli.CPUTime()
	runErr := cli.Run("xdpfwd", c.quiet, func() error { return poller.Run(ctx, f) }, func() cli.Sample {
		return cli.Sample{Packets: f.c.forwarded.Load(), Bytes: f.c.bytes.Load(), Drops: f.c.drops() + kernelDrops(f.ports)}
	})
	// Send what is pending, and wait (at most a second) for the kernel
	// to complete every frame.
	f.flush()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		busy := false
		for _, q := range f.ports {
			f.kick(q)
			f.reap(q)
			busy = busy || q.inflight > 0
		}
		if !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	st, _ := poller.Stats()
	sum.Seconds = el.Seconds()
	sum.Received = st.Packets
	sum.Forwarded = f.c.forwarded.Load()
	sum.PartialFinished = f.c.partialFinished.Load()
	sum.Bytes = f.c.bytes.Load()
	sum.Mpps = float64(sum.Forwarded) / el.Seconds() / 1e6
	sum.TTLExpired, sum.ICMPSent = f.c.ttlExpired.Load(), f.c.icmpSent.Load()
	sum.ICMPRateLimited, sum.ICMPNotSent = f.c.icmpLimited.Load(), f.c.noRoomICMP.Load()
	sum.NoRoute, sum.NoNeighbour, sum.NotRoutable = f.c.noRoute.Load(), f.c.noNeighbour.Load(), f.c.notRoutable.Load()
	sum.NotIP, sum.ParseErrors, sum.TXRingFull = f.c.notIP.Load(), f.c.parseErrors.Load(), f.c.txFull.Load()
	if f.cache != nil {
		sum.RouteLookups = f.cache.Lookups
	}
	for i, q := range f.ports {
		x := st.Sockets[i].XDP
		sum.XDP = append(sum.XDP, PortXDP{Iface: q.name, RXDropped: x.RXDropped, RXRingFull: x.RXRingFull,
			RXFillEmpty: x.RXFillRingEmptyDesc, TXInvalid: x.TXInvalidDescs})
	}
	sum.Poller = st.String()
	sum.CPUSeconds = (cli.CPUTime() - cpu0).Seconds()
	err = cleanup()
	acct := u.Accounting()
	sum.Accounting = acct.String()
	sum.AccountingOK = acct.Free == acct.Total
	err = errors.Join(runErr, err, u.Close())
	return sum, err
}

func kernelDrops(ports []*port) uint64 {
	var n uint64
	for _, q := range ports {
		if x, err := q.sock.Stats(); err == nil {
			n += x.RXDropped + x.RXRingFull
		}
	}
	return n
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

func (f *forwarder) metrics(p *rxpath.Poller) []cli.Metric {
	ctr := func(name, help string, v *atomic.Uint64) cli.Metric {
		return cli.Metric{Name: name, Help: help, Value: func() float64 { return float64(v.Load()) }}
	}
	return []cli.Metric{
		ctr("forwarded_packets_total", "Packets sent on.", &f.c.forwarded),
		ctr("forwarded_bytes_total", "Bytes sent on.", &f.c.bytes),
		ctr("ttl_expired_total", "Packets whose TTL or hop limit expired.", &f.c.ttlExpired),
		ctr("icmp_sent_total", "ICMP time exceeded messages sent.", &f.c.icmpSent),
		ctr("no_route_total", "Packets without a route through a served interface.", &f.c.noRoute),
		ctr("no_neighbour_total", "Packets whose next hop has no resolved MAC.", &f.c.noNeighbour),
		ctr("tx_ring_full_total", "Packets dropped because the TX ring was full.", &f.c.txFull),
		{Name: "received_packets_total", Help: "Packets taken off the RX rings.", Value: func() float64 {
			st, _ := p.Stats()
			return float64(st.Packets)
		}},
		{Name: "kernel_drops_total", Help: "Packets the kernel dropped before the RX rings (XDP_STATISTICS).", Value: func() float64 {
			return float64(kernelDrops(f.ports))
		}},
	}
}

var _ rxpath.RoundEnder = (*forwarder)(nil)
