package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/nexthop"
	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Summary is xdpfwd's final report. The counters are the sums over the
// queues; Queues has each queue's own.
type Summary struct {
	Mode, In, Out   string
	AttachMode      string
	ZeroCopy        bool
	MultiBuffer     bool
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
	TXRingFull      uint64 // forwarded packets dropped because the TX ring stayed full
	Policed         uint64 // dropped by -max-pps
	ICMPTXRingFull  uint64 // ICMP errors built but dropped because the TX ring stayed full
	PartialFinished uint64 // UDP/TCP checksums left partial by the sender, finished here
	RouteLookups    uint64
	RecycleErrors   uint64 // completion batches rxpath.Poller.Recycle refused
	// Completed are the TX completions taken back (frames, not packets);
	// Recycled are those that went to the receiving poller's Fill ring
	// through rxpath.Poller.Recycle. The rest went to the UMEM allocator
	// (those reaped after the poller stopped, and those of batches Recycle
	// refused, counted in RecycleErrors), except after a double free:
	// such a batch is offered to Recycle again frame by frame, and only
	// its frames refused as given back twice stay out (AccountingOK
	// tells).
	Completed, Recycled uint64
	XDP                 []PortXDP
	Queues              []QueueSummary
	Poller              string
	CPUSeconds          float64
	Accounting          string
	AccountingOK        bool
}

// QueueSummary is one queue's share.
type QueueSummary struct {
	Queue, CPU          int
	Received, Forwarded uint64
	Bytes, Drops        uint64
	Chains              uint64  // multi-buffer packets received
	CPUSeconds          float64 // the queue thread's CPU time
}

// PortXDP are one interface's kernel counters (XDP_STATISTICS), summed
// over its queues.
type PortXDP struct {
	Iface                                         string
	RXDropped, RXRingFull, RXFillEmpty, TXInvalid uint64
}

// run forwards on every queue of c.queues: queue i of the input interface
// to queue i of the output interface (and back), each queue on its own
// thread, with its own UMEM shared by its two sockets.
func run(ctx context.Context, c *config) (*Summary, error) {
	own, err := ownAddrs()
	if err != nil {
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
	for _, name := range names {
		fs, err := c.nic.Frame(name)
		if err != nil {
			return nil, err
		}
		c.frameSize = max(c.frameSize, fs)
	}
	filter, err := c.nic.Filter(&xsk.Filter{IPv4UDP: true, IPv4TCP: true, IPv6UDP: true, IPv6TCP: true, PassDst: own})
	if err != nil {
		return nil, err
	}
	ifis := make([]*net.Interface, len(names))
	software := make([]bool, len(names))
	featuresFrom := make([]string, len(names))
	jumbo := false
	for i, name := range names {
		if ifis[i], err = net.InterfaceByName(name); err != nil {
			return nil, err
		}
		featuresFrom[i] = "?"
		if info, err := xsk.Device(name); err == nil {
			featuresFrom[i] = info.FeaturesFrom
			software[i], _ = info.SoftwareChecksum()
		}
		// 2048-byte frames hold 2048-256 (XDP headroom) bytes of a packet:
		// larger ones come as multi-buffer chains.
		jumbo = jumbo || ifis[i].MTU+14+8 > c.frameSize-256
	}
	sz := uint32(c.ring)
	cfg := &mq.Config{
		Ifnames: names,
		UMEM:    umemConfig(c),
		Socket: xsk.Config{RXSize: sz, TXSize: sz, FillSize: sz, CompletionSize: sz,
			MaxTXBudget: min(256, sz), MultiBuffer: jumbo},
		Program: &xsk.ProgramConfig{Mode: mode, Filter: filter},
		// Each Fill ring holds one ring's worth of frames; the rest of the
		// UMEM is for frames in flight on the TX rings.
		Poller: rxpath.Config{CopyThreshold: -1, FillFrames: c.ring, Coalesce: c.coalesce, MaxDelay: c.maxDelay, RuntimeSleep: c.runtimeSleep, Prefetch: true},
	}
	if c.maxPPS > 0 {
		// -max-pps polices by arrival time: the XDP program's clock.
		cfg.Program.Metadata, cfg.Poller.Metadata = true, true
	}
	cli.QueueConfig(cfg, c.queues, c.cpus)
	set, err := mq.Open(cfg)
	if err != nil {
		return nil, cli.Explain(c.in, len(c.queues), c.frameSize, c.frames, err)
	}
	fwds := make([]*forwarder, len(set.Queues()))
	for i, q := range set.Queues() {
		f := &forwarder{l3: c.mode == "l3", batch: c.batch, icmpRate: c.icmpRate, keep: make([]xsk.Desc, 0, 4), u: q.UMEM, p: q.Poller}
		for j, ifi := range ifis {
			p := &port{name: ifi.Name, ifindex: ifi.Index, sock: q.Sockets[j], prog: set.Programs()[j],
				pend: make([]xsk.Desc, 0, 2*c.batch+64), comp: make([]uint64, 256), software: software[j]}
			copy(p.mac[:], ifi.HardwareAddr)
			p.addr4, p.addr6 = ifaceAddrs(ifi)
			f.ports = append(f.ports, p)
		}
		if c.dstMAC != "" {
			out := f.ports[len(f.ports)-1]
			out.dst, out.hasDst = c.dstMACVal, true
		}
		if f.l3 {
			f.cache = nexthop.NewCache() // per queue: no lock between queues
		}
		// -max-pps is shared out among the queues.
		nq := float64(len(set.Queues()))
		f.police = newPolicer(c.maxPPS/nq, c.maxBurst/nq)
		fwds[i] = f
	}
	q0 := set.Queues()[0]
	sum := &Summary{Mode: c.mode, In: c.in, Out: c.out, AttachMode: set.Programs()[0].Mode().String(),
		ZeroCopy: q0.Sockets[0].ZeroCopy(), MultiBuffer: q0.Sockets[0].MultiBuffer()}
	var qdesc []string
	for _, q := range set.Queues() {
		qdesc = append(qdesc, fmt.Sprintf("%d@cpu%d", q.ID, q.CPU))
	}
	// "ready" once every queue's poller has put its frames on its Fill
	// rings (the end of its first round): a packet that finds a Fill ring
	// empty is dropped.
	readyMsg := fmt.Sprintf("xdpfwd: ready: %s %s -> %s, queues %s, attach %s, zero-copy %v, multi-buffer %v, %d frames per queue\n",
		c.mode, c.in, c.out, strings.Join(qdesc, " "), sum.AttachMode, sum.ZeroCopy, sum.MultiBuffer, c.frames)
	if c.maxPPS > 0 {
		level, why := set.Programs()[0].Metadata()
		readyMsg += fmt.Sprintf("xdpfwd: -max-pps %.0f, bucket %.0f packets; RX metadata %s", c.maxPPS, c.maxBurst, level)
		if why != nil {
			readyMsg += fmt.Sprintf(" (%s)", strings.ReplaceAll(why.Error(), "\n", "; "))
		}
		readyMsg += "\n"
	}
	var notReady atomic.Int32
	notReady.Store(int32(len(fwds)))
	for _, f := range fwds {
		f.ready = func() {
			if notReady.Add(-1) == 0 {
				fmt.Print(readyMsg)
			}
		}
	}
	for j, prog := range set.Programs() {
		via := "bpf_link"
		if !prog.BPFLink() {
			via = "attached through rtnetlink (no XDP bpf_link: stays attached if killed)"
		}
		fmt.Printf("xdpfwd: %s: kernel features: %s; XDP %s; device facts from %s; finishes partial checksums %v\n",
			names[j], q0.Sockets[j].Features(), via, featuresFrom[j], software[j])
	}

	if c.metrics != "" {
		addr, err := serveMetrics(ctx, c.metrics, set, fwds)
		if err != nil {
			return nil, errors.Join(err, set.Close())
		}
		fmt.Printf("xdpfwd: metrics on http://%s/metrics\n", addr)
	}

	start := time.Now()
	cpu0 := cli.CPUTime()
	sample := func() cli.Sample {
		var s cli.Sample
		s.Queues = make([]uint64, len(fwds))
		for i, f := range fwds {
			n := f.c.forwarded.Load()
			s.Queues[i] = n
			s.Packets += n
			s.Bytes += f.c.bytes.Load()
			s.Drops += f.c.drops()
		}
		x := set.Stats().Total.XDP
		s.Drops += x.RXDropped + x.RXRingFull
		return s
	}
	runErr := cli.Run("xdpfwd", c.quiet, func() error {
		return set.Go(ctx, func(ctx context.Context, q *mq.Queue) error {
			f := fwds[q.Index]
			err := q.Poller.Run(ctx, f)
			f.finish()
			return err
		})
	}, sample)
	el := time.Since(start)
	sum.Seconds = el.Seconds()
	var ps []string
	for i, q := range set.Queues() {
		f := fwds[i]
		pst, _ := q.Poller.Stats()
		sum.Queues = append(sum.Queues, QueueSummary{Queue: q.ID, CPU: q.CPU, Received: pst.Packets,
			Forwarded: f.c.forwarded.Load(), Bytes: f.c.bytes.Load(), Drops: f.c.drops(), Chains: pst.Chains, CPUSeconds: q.CPUTime().Seconds()})
		sum.Received += pst.Packets
		sum.Forwarded += f.c.forwarded.Load()
		sum.Bytes += f.c.bytes.Load()
		sum.TTLExpired += f.c.ttlExpired.Load()
		sum.ICMPSent += f.c.icmpSent.Load()
		sum.ICMPRateLimited += f.c.icmpLimited.Load()
		sum.ICMPNotSent += f.c.noRoomICMP.Load()
		sum.NoRoute += f.c.noRoute.Load()
		sum.NoNeighbour += f.c.noNeighbour.Load()
		sum.NotRoutable += f.c.notRoutable.Load()
		sum.NotIP += f.c.notIP.Load()
		sum.ParseErrors += f.c.parseErrors.Load()
		sum.TXRingFull += f.c.txFull.Load()
		sum.RecycleErrors += f.c.recycleErrors.Load()
		sum.Completed += f.c.completed.Load()
		sum.Recycled += f.c.recycled.Load()
		sum.Policed += f.c.policed.Load()
		sum.ICMPTXRingFull += f.c.icmpTXFull.Load()
		sum.PartialFinished += f.c.partialFinished.Load()
		if f.cache != nil {
			sum.RouteLookups += f.cache.Lookups
		}
		if len(set.Queues()) > 1 {
			ps = append(ps, fmt.Sprintf("queue %d: %s", q.ID, pst.String()))
		} else {
			ps = append(ps, pst.String())
		}
		for j, sk := range q.Sockets {
			x, _ := sk.Stats()
			if i == 0 {
				sum.XDP = append(sum.XDP, PortXDP{Iface: names[j]})
			}
			px := &sum.XDP[j]
			px.RXDropped += x.RXDropped
			px.RXRingFull += x.RXRingFull
			px.RXFillEmpty += x.RXFillRingEmptyDesc
			px.TXInvalid += x.TXInvalidDescs
		}
	}
	sum.Mpps = float64(sum.Forwarded) / el.Seconds() / 1e6
	sum.Poller = strings.Join(ps, "; ")
	sum.CPUSeconds = (cli.CPUTime() - cpu0).Seconds()
	// Close waits for the TX rings, detaches the programs and checks
	// that every queue's UMEM has all its frames back.
	err = set.Close()
	sum.AccountingOK = !errors.Is(err, mq.ErrFramesLost)
	sum.Accounting = "every UMEM frame back"
	if !sum.AccountingOK {
		sum.Accounting = err.Error()
	}
	return sum, errors.Join(runErr, err)
}

// umemConfig: each queue's UMEM, shared by its two sockets.
func umemConfig(c *config) umem.Config {
	return umem.Config{FrameSize: uint32(max(c.frameSize, xsk.FrameSizeDefault)), FrameCount: uint32(c.frames)}
}

// finish sends what is pending when the poller stopped, and waits (at
// most a second) for the kernel to complete every frame, on the queue's
// own thread.
func (f *forwarder) finish() {
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
			return
		}
		time.Sleep(time.Millisecond)
	}
}
