package main

import (
	"context"

	"errors"
	"fmt"
	"github.com/HdrHistogram/hdrhistogram-go"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Summary is xdprecv's final report: sums over the queues, and each
// queue's share in Queues.
type Summary struct {
	Iface      string
	Seconds    float64
	Packets    uint64 // every packet the sockets got
	Bytes      uint64
	Valid      uint64 // generator packets with good checksums and pattern
	Flows      int    // flows seen (a flow seen on two queues counts twice)
	Gaps       uint64 // sequence numbers skipped (lost, or late)
	Late       uint64 // sequence numbers below the next expected (reordered or duplicated)
	Duplicates uint64 // late arrivals of a sequence number already seen (among the last 64 of its flow)
	Reordered  uint64 // Late - Duplicates
	Lost       uint64 // Gaps - Reordered, at least 0
	BadIPCsum  uint64
	BadUDPCsum uint64 // wrong UDP checksums (not partial ones)
	// PartialUDPCsum counts datagrams whose UDP checksum field holds the
	// pseudo-header sum: offloaded by a sender behind a software device
	// (veth, ...) and never finished (csum.Partial). They are not counted
	// as bad, and their payload is checked.
	PartialUDPCsum uint64
	BadPayload     uint64 // wrong pattern or size
	Other          uint64 // not UDP, or not a generator payload
	Jumbo          uint64 // multi-buffer packets received
	TTLMin         int
	TTLMax         int
	Mpps           float64
	XDPDropped     uint64 // XDP_STATISTICS rx_dropped + rx_ring_full
	FillEmpty      uint64
	PcapPackets    uint64
	Queues         []QueueSummary
	Poller         string
	CPUSeconds     float64
	Accounting     string
	AccountingOK   bool
	// Latency is the one-way latency of stamped packets (-latency).
	Latency *LatencySummary `json:",omitempty"`
	// Proto counts traffic other than xdpgen's UDP (-tcp, -ethertype,
	// -all).
	Proto *ProtoSummary `json:",omitempty"`
}

// QueueSummary is one queue's share.
type QueueSummary struct {
	Queue, CPU            int
	Packets, Bytes, Valid uint64
	Lost                  uint64
	CPUSeconds            float64 // the queue thread's CPU time
}

func run(ctx context.Context, cancel context.CancelFunc, c *config) (*Summary, error) {
	ifi, err := net.InterfaceByName(c.iface)
	if err != nil {
		return nil, err
	}
	var pcapFile *os.File
	var pcap *pcapWriter
	if c.pcap != "" {
		f, err := os.Create(c.pcap)
		if err != nil {
			return nil, fmt.Errorf("-pcap: %w", err)
		}
		pcapFile = f
		if pcap, err = newPcapWriter(f, c.snaplen); err != nil {
			f.Close()
			return nil, fmt.Errorf("-pcap: %w", err)
		}
	}
	closePcap := func() error {
		if pcapFile == nil {
			return nil
		}
		return errors.Join(pcap.flush(), pcapFile.Close())
	}
	filter := &xsk.Filter{IPv4UDP: true, IPv6UDP: true, IPv4TCP: c.tcp, IPv6TCP: c.tcp}
	if c.port > 0 {
		filter.DstPorts = []uint16{uint16(c.port)}
	}
	filter, err = c.nic.Filter(filter)
	if err != nil {
		return nil, errors.Join(err, closePcap())
	}
	countProto := c.tcp || c.all || len(filter.EtherTypes) > 0
	if c.all {
		filter = nil // every frame on the queue
	}
	frameSize, err := c.nic.Frame(c.iface)
	if err != nil {
		return nil, errors.Join(err, closePcap())
	}
	mode := xsk.AttachAuto
	switch strings.ToLower(c.xdpMode) {
	case "native":
		mode = xsk.AttachNative
	case "generic":
		mode = xsk.AttachGeneric
	}
	sz := uint32(c.ring)
	cfg := &mq.Config{
		Ifnames: []string{c.iface},
		UMEM:    umem.Config{FrameSize: uint32(frameSize), FrameCount: uint32(c.frames)},
		// 2048-byte frames hold 1792 bytes of a packet: larger ones come
		// as multi-buffer chains.
		Socket:  xsk.Config{NoTX: true, RXSize: sz, FillSize: sz, MultiBuffer: ifi.MTU+14+8 > frameSize-256},
		Program: &xsk.ProgramConfig{Filter: filter, Mode: mode, Metadata: c.latency},
	}
	cfg.Poller.Metadata, cfg.Poller.Coalesce, cfg.Poller.RuntimeSleep = c.latency, c.coalesce, c.runtimeSleep
	cfg.Poller.MaxDelay = c.maxDelay
	cli.QueueConfig(cfg, c.queues, c.cpus)
	set, err := mq.Open(cfg)
	if err != nil {
		return nil, errors.Join(cli.Explain(c.iface, len(c.queues), frameSize, c.frames, err), closePcap())
	}
	// The NAPI instances exist now (veth: with the XDP program attached);
	// the old settings go back before the program goes (set.Close).
	var napi *xsk.NAPIChange
	if c.napiDefer >= 0 {
		napi, err = xsk.SetNAPIDeferral(c.iface, xsk.NAPIDeferral{DeferHardIRQs: uint32(c.napiDefer), GROFlushTimeout: c.napiFlush})
		if err != nil {
			return nil, errors.Join(err, set.Close(), closePcap())
		}
	}
	multi := len(set.Queues()) > 1
	rs := make([]*receiver, len(set.Queues()))
	var lats []*latency
	for i := range rs {
		r := &receiver{pat: payload.Pattern(65536), flat: make([]byte, 0, 65536), next: make([]uint64, 65536),
			win: make([]uint64, 65536), count: c.count, stop: cancel, ttlMin: 256, pcap: pcap}
		if multi {
			r.count = 0 // the watcher below stops at the total
		}
		if countProto {
			r.proto = newProtoCounters()
		}
		if c.latency {
			r.lat = newLatency(c.clock)
			if c.json {
				r.lat.iv = hdrhistogram.New(latMin, latMax, latDigits)
			}
			lats = append(lats, r.lat)
		}
		rs[i] = r
	}
	sum := func(f func(r *receiver) *atomic.Uint64) uint64 {
		var n uint64
		for _, r := range rs {
			n += f(r).Load()
		}
		return n
	}
	var qdesc []string
	for _, q := range set.Queues() {
		qdesc = append(qdesc, fmt.Sprintf("%d@cpu%d", q.ID, q.CPU))
	}
	q0 := set.Queues()[0]
	// "ready" once every queue's poller has put its frames on its Fill
	// ring (the end of its first round): a datagram that finds the Fill
	// ring empty is dropped.
	readyMsg := fmt.Sprintf("xdprecv: ready: %s queues %s, port %d, attach %s, zero-copy %v, multi-buffer %v\n"+
		"xdprecv: kernel features: %s; XDP %s; device facts from %s\n",
		c.iface, strings.Join(qdesc, " "), c.port, set.Programs()[0].Mode(), q0.Sockets[0].ZeroCopy(), q0.Sockets[0].MultiBuffer(),
		q0.Sockets[0].Features(), attachVia(set.Programs()[0]), factsFrom(c.iface))
	if c.latency {
		level, why := set.Programs()[0].Metadata()
		readyMsg += fmt.Sprintf("xdprecv: latency: %s clock; RX metadata %s", clockNames[c.clock], level)
		if why != nil {
			readyMsg += fmt.Sprintf(" (not more: %v)", strings.ReplaceAll(why.Error(), "\n", "; "))
		}
		readyMsg += "\n"
	}
	if napi != nil {
		readyMsg += fmt.Sprintf("xdprecv: NAPI deferral: napi_defer_hard_irqs %d, gro_flush_timeout %v, via %s\n", c.napiDefer, c.napiFlush, napi.Via())
	}
	var notReady atomic.Int32
	notReady.Store(int32(len(rs)))
	for _, r := range rs {
		r.ready = func() {
			if notReady.Add(-1) == 0 {
				if c.json {
					// stdout carries JSON only: the words go to stderr.
					fmt.Fprint(os.Stderr, readyMsg)
					jsonLine(readyEvent{Type: "ready", Iface: c.iface, Queues: len(rs), Port: c.port})
				} else {
					fmt.Print(readyMsg)
				}
			}
		}
	}
	if c.metrics != "" {
		addr, err := serveMetrics(ctx, c.metrics, c.iface, set, rs, latencyMetrics(lats)...)
		if err != nil {
			return nil, errors.Join(err, napi.Restore(), set.Close(), closePcap())
		}
		fmt.Printf("xdprecv: metrics on http://%s/metrics\n", addr)
	}

	if multi && c.count > 0 {
		// Stop at the total without a counter shared by the queues.
		go func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if sum(func(r *receiver) *atomic.Uint64 { return &r.valid }) >= c.count {
						cancel()
						return
					}
				}
			}
		}()
	}

	start := time.Now()
	cpu0 := cli.CPUTime()
	var stopStream func()
	if c.json {
		stopStream = startStream(start, set, rs, lats)
	}
	runErr := cli.Run("xdprecv", c.quiet || c.json, func() error {
		return set.Run(ctx, func(q *mq.Queue) rxpath.Handler { return rs[q.Index] })
	}, func() cli.Sample {
		x := set.Stats().Total.XDP
		drops := x.RXDropped + x.RXRingFull
		s := cli.Sample{Packets: sum(func(r *receiver) *atomic.Uint64 { return &r.packets }),
			Bytes: sum(func(r *receiver) *atomic.Uint64 { return &r.bytes })}
		for _, r := range rs {
			drops += r.drops()
			if multi {
				s.Queues = append(s.Queues, r.packets.Load())
			}
		}
		s.Drops = drops
		return s
	})
	if stopStream != nil {
		stopStream()
	}
	el := time.Since(start)
	out := &Summary{Iface: c.iface, Seconds: el.Seconds(), TTLMin: 256}
	var ps []string
	for i, q := range set.Queues() {
		r := rs[i]
		st, _ := q.Poller.Stats()
		x := st.Sockets[0].XDP
		qs := QueueSummary{Queue: q.ID, CPU: q.CPU, Packets: r.packets.Load(), Bytes: r.bytes.Load(), Valid: r.valid.Load(),
			CPUSeconds: q.CPUTime().Seconds()}
		qs.Lost = r.lost()
		out.Queues = append(out.Queues, qs)
		out.Packets += qs.Packets
		out.Bytes += qs.Bytes
		out.Valid += qs.Valid
		out.Flows += r.flows
		out.Gaps += r.gaps.Load()
		out.Late += r.late.Load()
		out.Duplicates += r.dups.Load()
		if r.proto != nil {
			if out.Proto == nil {
				out.Proto = &ProtoSummary{}
			}
			out.Proto.add(r.proto)
		}
		out.Lost += qs.Lost
		out.BadIPCsum += r.badIP.Load()
		out.BadUDPCsum += r.badUDP.Load()
		out.PartialUDPCsum += r.partialUDP.Load()
		out.BadPayload += r.badData.Load()
		out.Other += r.other.Load()
		out.Jumbo += st.Chains
		out.TTLMin, out.TTLMax = min(out.TTLMin, r.ttlMin), max(out.TTLMax, r.ttlMax)
		out.XDPDropped += x.RXDropped + x.RXRingFull
		out.FillEmpty += x.RXFillRingEmptyDesc
		out.PcapPackets += r.pcapN.Load()
		if multi {
			ps = append(ps, fmt.Sprintf("queue %d: %s", q.ID, st.String()))
		} else {
			ps = append(ps, st.String())
		}
	}
	out.Reordered = out.Late - min(out.Late, out.Duplicates)
	if out.TTLMin > out.TTLMax {
		out.TTLMin = 0
	}
	out.Mpps = float64(out.Packets) / el.Seconds() / 1e6
	out.Poller = strings.Join(ps, "; ")
	napiErr := napi.Restore() // nil for none
	err = set.Close()
	out.AccountingOK = !errors.Is(err, mq.ErrFramesLost)
	out.Accounting = "every UMEM frame back"
	if !out.AccountingOK {
		out.Accounting = err.Error()
	}
	out.CPUSeconds = (cli.CPUTime() - cpu0).Seconds()
	out.Latency = latencySummary(lats)
	return out, errors.Join(runErr, napiErr, err, closePcap())
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
