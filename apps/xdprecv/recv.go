package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Summary is xdprecv's final report.
type Summary struct {
	Iface      string
	Seconds    float64
	Packets    uint64 // every packet the socket got
	Bytes      uint64
	Valid      uint64 // generator packets with good checksums and pattern
	Flows      int    // flows seen
	Gaps       uint64 // sequence numbers skipped (lost, or late)
	Late       uint64 // sequence numbers below the next expected (reordered or duplicated)
	Lost       uint64 // Gaps - Late, at least 0
	BadIPCsum  uint64
	BadUDPCsum uint64 // wrong UDP checksums (not partial ones)
	// PartialUDPCsum counts datagrams whose UDP checksum field holds the
	// pseudo-header sum: offloaded by a sender behind a software device
	// (veth, ...) and never finished (csum.Partial). They are not counted
	// as bad, and their payload is checked.
	PartialUDPCsum uint64
	BadPayload     uint64 // wrong pattern or size
	Other          uint64 // not UDP, or not a generator payload
	TTLMin         int
	TTLMax         int
	Mpps           float64
	XDPDropped     uint64 // XDP_STATISTICS rx_dropped + rx_ring_full
	FillEmpty      uint64
	PcapPackets    uint64
	Poller         string
	CPUSeconds     float64
	Accounting     string
	AccountingOK   bool
}

type receiver struct {
	pat    []byte
	fr     pkt.Frame
	next   []uint64 // next expected sequence number per flow; 0 = not seen yet (stored +1)
	flows  int
	count  uint64
	stop   func()
	pcap   *pcapWriter
	ttlMin int
	ttlMax int

	packets, bytes, valid              atomic.Uint64
	ready                              func() // called after the poller's first round
	readyDone                          atomic.Bool
	gaps, late, badIP, badUDP, badData atomic.Uint64
	partialUDP                         atomic.Uint64
	other, pcapN                       atomic.Uint64
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
	r.packets.Add(1)
	r.bytes.Add(uint64(p.Len))
	if r.pcap != nil {
		r.pcap.write(time.Now(), b)
		r.pcapN.Add(1)
	}
	if len(p.Segments) != 1 || pkt.Parse(b, &r.fr) != nil || r.fr.Proto != pkt.ProtoUDP || r.fr.L4 == 0 || r.fr.Fragment {
		r.other.Add(1)
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
	h, ok := payload.Parse(data)
	if !ok {
		r.other.Add(1)
		return
	}
	if !payload.Check(r.pat, data, h) {
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
	case h.Seq+1 == exp:
		r.next[h.Flow] = exp + 1
	case h.Seq+1 > exp:
		r.gaps.Add(h.Seq + 1 - exp)
		r.next[h.Flow] = h.Seq + 2
	default:
		r.late.Add(1)
	}
	if v := r.valid.Add(1); r.count > 0 && v == r.count {
		r.stop()
	}
}

func run(ctx context.Context, cancel context.CancelFunc, c *config) (*Summary, error) {
	r := &receiver{pat: payload.Pattern(65536), next: make([]uint64, 65536), count: c.count, stop: cancel, ttlMin: 256}
	var pcapFile *os.File
	if c.pcap != "" {
		f, err := os.Create(c.pcap)
		if err != nil {
			return nil, fmt.Errorf("-pcap: %w", err)
		}
		pcapFile = f
		if r.pcap, err = newPcapWriter(f, c.snaplen); err != nil {
			f.Close()
			return nil, fmt.Errorf("-pcap: %w", err)
		}
	}
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: uint32(c.frames)})
	if err != nil {
		return nil, err
	}
	var (
		sock   *xsk.Socket
		prog   *xsk.Program
		poller *rxpath.Poller
	)
	cleanup := func() error {
		var errs []error
		if prog != nil {
			errs = append(errs, prog.Close())
		}
		if sock != nil {
			errs = append(errs, sock.Close())
		}
		if poller != nil {
			if _, err := poller.Reclaim(); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, poller.Close())
		}
		if pcapFile != nil {
			errs = append(errs, r.pcap.flush(), pcapFile.Close())
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*Summary, error) {
		err = errors.Join(err, cleanup(), u.Close())
		return nil, err
	}
	sz := uint32(c.ring)
	sock, err = xsk.New(c.iface, c.queue, u, &xsk.Config{NoTX: true, RXSize: sz, FillSize: sz})
	if err != nil {
		return fail(fmt.Errorf("socket on %s queue %d: %w", c.iface, c.queue, err))
	}
	filter := &xsk.Filter{IPv4UDP: true, IPv6UDP: true}
	if c.port > 0 {
		filter.DstPorts = []uint16{uint16(c.port)}
	}
	mode := xsk.AttachAuto
	switch strings.ToLower(c.xdpMode) {
	case "native":
		mode = xsk.AttachNative
	case "generic":
		mode = xsk.AttachGeneric
	}
	if prog, err = xsk.AttachProgram(c.iface, &xsk.ProgramConfig{Filter: filter, Mode: mode}); err != nil {
		return fail(fmt.Errorf("XDP program on %s: %w", c.iface, err))
	}
	if err := prog.Register(sock); err != nil {
		return fail(err)
	}
	if poller, err = rxpath.New(nil, sock); err != nil {
		return fail(err)
	}
	// "ready" once the poller has put its frames on the Fill ring (the
	// end of its first round): a datagram that finds the Fill ring empty
	// is dropped.
	features := fmt.Sprintf("xdprecv: kernel features: %s; XDP %s; device facts from %s\n", sock.Features(), attachVia(prog), factsFrom(c.iface))
	r.ready = func() {
		fmt.Printf("xdprecv: ready: %s queue %d, port %d, attach %s, zero-copy %v\n", c.iface, c.queue, c.port, prog.Mode(), sock.ZeroCopy())
		fmt.Print(features)
	}
	if c.metrics != "" {
		ctr := func(name, help string, v *atomic.Uint64) cli.Metric {
			return cli.Metric{Name: name, Help: help, Value: func() float64 { return float64(v.Load()) }}
		}
		addr, err := cli.ServeMetrics(ctx, c.metrics, "xdprecv", []cli.Metric{
			ctr("packets_total", "Packets received.", &r.packets),
			ctr("bytes_total", "Bytes received.", &r.bytes),
			ctr("valid_total", "Generator packets with good checksums and payload.", &r.valid),
			ctr("gaps_total", "Sequence numbers skipped.", &r.gaps),
			ctr("late_total", "Packets that arrived after a later one of their flow.", &r.late),
			ctr("bad_checksum_total", "Packets with a bad IPv4 header or UDP checksum.", &r.badUDP),
			ctr("partial_checksum_total", "Packets whose UDP checksum field holds the unfinished pseudo-header sum.", &r.partialUDP),
			ctr("bad_payload_total", "Generator packets with a wrong pattern or size.", &r.badData),
		})
		if err != nil {
			return fail(err)
		}
		fmt.Printf("xdprecv: metrics on http://%s/metrics\n", addr)
	}

	start := time.Now()
	cpu0 := cli.CPUTime()
	runErr := cli.Run("xdprecv", c.quiet, func() error { return poller.Run(ctx, r) }, func() cli.Sample {
		var drops uint64
		if x, err := sock.Stats(); err == nil {
			drops = x.RXDropped + x.RXRingFull
		}
		drops += r.gaps.Load() + r.badIP.Load() + r.badUDP.Load() + r.badData.Load()
		return cli.Sample{Packets: r.packets.Load(), Bytes: r.bytes.Load(), Drops: drops}
	})
	el := time.Since(start)
	st, _ := poller.Stats()
	x := st.Sockets[0].XDP
	sum := &Summary{
		Iface: c.iface, Seconds: el.Seconds(), Packets: r.packets.Load(), Bytes: r.bytes.Load(),
		Valid: r.valid.Load(), Flows: r.flows, Gaps: r.gaps.Load(), Late: r.late.Load(),
		BadIPCsum: r.badIP.Load(), BadUDPCsum: r.badUDP.Load(), PartialUDPCsum: r.partialUDP.Load(), BadPayload: r.badData.Load(), Other: r.other.Load(),
		TTLMin: r.ttlMin, TTLMax: r.ttlMax, XDPDropped: x.RXDropped + x.RXRingFull, FillEmpty: x.RXFillRingEmptyDesc,
		PcapPackets: r.pcapN.Load(), Poller: st.String(),
	}
	if sum.TTLMin > sum.TTLMax {
		sum.TTLMin = 0
	}
	if sum.Gaps > sum.Late {
		sum.Lost = sum.Gaps - sum.Late
	}
	sum.Mpps = float64(sum.Packets) / el.Seconds() / 1e6
	err = cleanup()
	acct := u.Accounting()
	sum.Accounting, sum.AccountingOK = acct.String(), acct.Free == acct.Total
	sum.CPUSeconds = (cli.CPUTime() - cpu0).Seconds()
	return sum, errors.Join(runErr, err, u.Close())
}

// attachVia says how the XDP program is attached.
func attachVia(p *xsk.Program) string {
	if p.BPFLink() {
		return "bpf_link"
	}
	return "attached through rtnetlink (no XDP bpf_link: stays attached if killed)"
}

// factsFrom says where the device facts came from: the netdev generic
// netlink family, or ethtool alone (no XDP/XSK feature bits) without it.
func factsFrom(iface string) string {
	info, err := xsk.Device(iface)
	if err != nil {
		return err.Error()
	}
	return info.FeaturesFrom
}
