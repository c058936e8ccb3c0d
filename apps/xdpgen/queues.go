package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/craft"
	"github.com/xdpkit/xdpkit/apps/internal/nexthop"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Summary is xdpgen's final report: sums over the queues, and each
// queue's share in Queues.
type Summary struct {
	Iface, Src, Dst, DstMAC string
	Mode                    string
	Flows                   int
	Skipped                 uint64 `json:",omitempty"` // pcap records not sent: not Ethernet, or longer than a frame
	Loops                   int    `json:",omitempty"` // pcap replay loops begun
	Sent                    uint64 // packets queued on the TX rings
	Bytes                   uint64
	Completed               uint64 // frames the kernel completed
	Frames                  uint64 // frames sent (more than Sent with multi-buffer)
	NotCompleted            uint64 // frames sent and not completed at exit (an error beyond TXInvalid)
	Seconds                 float64
	Mpps, Mbps              float64
	Policy                  string
	PolicyReason            string
	PolicyWarning           string // set when the policy sends checksums an XDP receiver finds unfinished
	ZeroCopy                bool
	MultiBuffer             bool
	Waits                   uint64 // times no frame or ring entry was free
	Kicks                   uint64
	TXInvalid               uint64 // XDP_STATISTICS tx_invalid_descs
	TXRingEmpty             uint64
	Queues                  []QueueSummary
	CPUSeconds              float64
	Accounting              string
	AccountingOK            bool
}

// QueueSummary is one queue's share.
type QueueSummary struct {
	Queue, CPU, Flows int
	Sent, Bytes       uint64
	Completed         uint64
	Frames            uint64
	CPUSeconds        float64 // the queue thread's CPU time
}

func run(ctx context.Context, c *config) (*Summary, error) {
	ifi, err := net.InterfaceByName(c.iface)
	if err != nil {
		return nil, err
	}
	if c.dstAddr.IsValid() && (!c.srcAddr.IsValid() || c.nextMAC == nil) {
		hop, err := nexthop.Resolve(c.dstAddr)
		if err != nil {
			return nil, fmt.Errorf("-dst %s: %w (give -src and -dst-mac)", c.dstAddr, err)
		}
		if hop.LinkIndex != ifi.Index {
			return nil, fmt.Errorf("-dst %s: the route goes out of interface %d, not %s", c.dstAddr, hop.LinkIndex, c.iface)
		}
		if c.nextMAC == nil {
			c.nextMAC = net.HardwareAddr(hop.MAC[:])
		}
		if !c.srcAddr.IsValid() {
			c.srcAddr = hop.Src
		}
		if !c.srcAddr.IsValid() {
			return nil, fmt.Errorf("-dst %s: no source address on the route (give -src)", c.dstAddr)
		}
	}
	nq := len(c.queues)
	if c.flows < nq {
		c.flows = nq // every queue sends at least one flow
	}
	maxSize := 0
	for _, n := range c.sizes {
		maxSize = max(maxSize, n)
	}
	frameSize, err := c.nic.Frame(c.iface)
	if err != nil {
		return nil, err
	}
	var rp *replay
	if c.engine {
		// Whole frames written into one UMEM frame each; a pcap
		// record longer than that or the MTU (plus its VLAN tags) is
		// skipped (and counted).
		fit := frameSize - umem.TxMetadataSize
		if c.pcapMode {
			if rp, err = openReplay(c, fit); err != nil {
				return nil, err
			}
			defer rp.Close()
		} else if maxSize > fit {
			return nil, fmt.Errorf("-size %d: above the %d bytes of one UMEM frame; larger frames only in -mode udp without the field engine's options", maxSize, fit)
		}
		if c.srcAddr.IsValid() && !c.srcPfx.IsValid() {
			c.srcPfx = netip.PrefixFrom(c.srcAddr, c.srcAddr.BitLen())
		}
	}
	txProg, err := xsk.ParseTXProgram(c.txProgS)
	if err != nil {
		return nil, err
	}
	// A frame holds its size minus the TX metadata: larger packets
	// leave as multi-buffer chains.
	jumbo := maxSize > frameSize-umem.TxMetadataSize
	// XDP_UMEM_TX_SW_CSUM for the auto policy on a software device, where
	// the kernel's software checksum is one of the two ways to right bytes
	// (txpath.Decision picks the cheaper).
	swCsum := false
	if c.policy == txpath.Auto {
		if info, err := xsk.Device(c.iface); err == nil {
			swCsum, _ = info.SoftwareChecksum()
		}
	}
	cfg := &mq.Config{
		Ifnames:   []string{c.iface},
		UMEM:      umem.Config{FrameSize: uint32(frameSize), FrameCount: uint32(c.frames), TxMetadataLen: umem.TxMetadataSize, TxSwCsum: swCsum},
		Socket:    xsk.Config{NoRX: true, MaxTXBudget: 256, MultiBuffer: jumbo},
		NoProgram: true,
		TXProgram: txProg,
		NoPoller:  true,
		Sender:    &txpath.Config{Policy: c.policy, BatchSize: c.batch},
	}
	cli.QueueConfig(cfg, c.queues, c.cpus)
	set, umemNote, err := openSet(cfg)
	if err != nil {
		return nil, cli.Explain(c.iface, nq, frameSize, c.frames, err)
	}
	gens := make([]*gen, nq)
	pat := payload.Pattern(max(2048, maxSize))
	var ccfg craft.Config
	if c.engine && !c.pcapMode {
		ccfg = craft.Config{Mode: c.mode, VLANs: c.vlans, EtherType: c.ethertype, Pattern: c.pattern,
			Src: c.srcPfx, Dst: c.dstPfx, SrcPorts: c.sports, DstPorts: c.dports, Order: c.order, Seed: c.seed,
			TTL: uint8(c.ttl), MTU: c.mtu, Sizes: c.sizes, Stride: nq}
		copy(ccfg.SrcMAC[:], c.ifaceMAC)
		copy(ccfg.DstMAC[:], c.nextMAC)
	}
	for i, q := range set.Queues() {
		g := &gen{s: q.Senders[0], sizes: c.sizes, pat: pat, stamp: c.timestamp}
		if c.engine {
			g.rp = rp
			if !c.pcapMode {
				ccfg.Start, ccfg.Flow = i, uint16(i)
				if g.b, err = craft.New(&ccfg); err != nil {
					return nil, errors.Join(err, set.Close())
				}
			}
			gens[i] = g
			continue
		}
		for f := i; f < c.flows; f += nq {
			fl, err := txpath.NewUDPFlow(c.ifaceMAC, c.nextMAC,
				netip.AddrPortFrom(c.srcAddr, uint16(c.sport+f)), netip.AddrPortFrom(c.dstAddr, uint16(c.dport)),
				&txpath.UDPFlowConfig{TTL: uint8(c.ttl)})
			if err != nil {
				return nil, errors.Join(err, set.Close())
			}
			g.flows = append(g.flows, fl)
			g.ids = append(g.ids, uint16(f))
		}
		g.seq = make([]uint64, len(g.flows))
		g.hdrLen = g.flows[0].HeaderLen()
		gens[i] = g
	}
	q0 := set.Queues()[0]
	dec := q0.Senders[0].Decision()
	flows := c.flows
	if g := gens[0]; g.b != nil {
		flows = int(min(g.b.Flows(), 1<<31))
	} else if g.rp != nil {
		flows = 0
	}
	mode := c.modeS
	sum := &Summary{Iface: c.iface, Src: c.srcAddr.String(), Dst: c.dstAddr.String(), DstMAC: c.nextMAC.String(),
		Mode: mode, Flows: flows, Policy: dec.Policy.String(), PolicyReason: dec.Reason, PolicyWarning: dec.Warning, ZeroCopy: q0.Sockets[0].ZeroCopy(),
		MultiBuffer: q0.Sockets[0].MultiBuffer()}
	if c.policy != txpath.Auto {
		sum.Policy = c.policy.String()
	}
	var qdesc []string
	for _, q := range set.Queues() {
		qdesc = append(qdesc, fmt.Sprintf("%d@cpu%d", q.ID, q.CPU))
	}
	fmt.Printf("xdpgen: ready: %s %s -> %s via %s (%s), %d flow(s), queues %s, policy %s\n",
		mode, sum.Src, sum.Dst, c.iface, sum.DstMAC, flows, strings.Join(qdesc, " "), sum.Policy)
	fmt.Printf("xdpgen: %s\n", dec)
	from := "?"
	if info, err := xsk.Device(c.iface); err == nil {
		from = info.FeaturesFrom
	}
	fmt.Printf("xdpgen: kernel features: %s; UMEM %s; device facts from %s\n", q0.Sockets[0].Features(), umemNote, from)
	if dec.Warning != "" {
		fmt.Fprintf(os.Stderr, "xdpgen: WARNING: %s\n", dec.Warning)
	}

	pps := c.pps
	if c.bps > 0 {
		avg := 0
		for _, n := range c.sizes {
			avg += n
		}
		over := 0
		if c.l1 {
			over = l1Overhead
		}
		if !c.engine {
			pps = c.bps / 8 / (float64(avg)/float64(len(c.sizes)) + float64(over))
		}
		for _, g := range gens {
			g.pace = pacer{rate: c.bps / float64(nq), bits: true, overhead: over}
		}
	} else {
		for _, g := range gens {
			g.pace = pacer{rate: pps / float64(nq)}
		}
	}
	if rp != nil && rp.original {
		gens[0].pace.rate = 0 // the capture's timing
	}
	total := func() cli.Sample {
		st := set.Stats()
		s := cli.Sample{Packets: st.Total.Packets, Bytes: st.Total.Bytes}
		if nq > 1 {
			for _, qs := range st.Queues {
				s.Queues = append(s.Queues, qs.Packets)
			}
		}
		return s
	}
	if c.metrics != "" {
		addr, err := serveMetrics(ctx, c.metrics, c.iface, set, gens)
		if err != nil {
			return nil, errors.Join(err, set.Close())
		}
		fmt.Printf("xdpgen: metrics on http://%s/metrics\n", addr)
	}

	// -duration counts from here, the end of set-up: from the same
	// instant as the summary's Seconds, so that those are never fewer.
	cpu0 := cli.CPUTime()
	start := time.Now()
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(c.duration))
		defer cancel()
	}
	runErr := cli.Run("xdpgen", c.quiet, func() error {
		return set.Go(ctx, func(ctx context.Context, q *mq.Queue) error {
			g := gens[q.Index]
			count := c.count
			if count > 0 {
				count = cli.QueueRate(c.count, q.Index, nq)
				g.stopAtZero = count == 0
			}
			err := g.loop(ctx, count, pps/float64(nq), c.batch, c.stall, &q.Counters.Packets, &q.Counters.Bytes)
			// The last frames get the -stall bound to complete; what
			// is still out then is reported below, as an error.
			dctx, cancel := context.WithTimeout(context.Background(), c.stall)
			defer cancel()
			if derr := g.s.Drain(dctx); derr != nil && !errors.Is(derr, context.DeadlineExceeded) {
				err = errors.Join(err, derr)
			}
			return err
		})
	}, total)
	el := time.Since(start)
	for i, q := range set.Queues() {
		g := gens[i]
		st := g.s.Stats()
		sum.Queues = append(sum.Queues, QueueSummary{Queue: q.ID, CPU: q.CPU, Flows: len(g.flows),
			Sent: g.sent, Bytes: g.bytes, Completed: st.Completed, Frames: st.Descs, CPUSeconds: q.CPUTime().Seconds()})
		sum.Sent += g.sent
		sum.Bytes += g.bytes
		sum.Completed += st.Completed
		sum.Frames += st.Descs
		if st.Descs > st.Completed {
			sum.NotCompleted += st.Descs - st.Completed
		}
		sum.Waits += g.waits
		if g.rp != nil {
			sum.Skipped, sum.Loops = g.rp.skipped, g.rp.loop
		}
		sum.Kicks += st.Kicks
		if x, err := q.Sockets[0].Stats(); err == nil {
			sum.TXInvalid += x.TXInvalidDescs
			sum.TXRingEmpty += x.TXRingEmptyDescs
		}
	}
	sum.Seconds = el.Seconds()
	sum.Mpps = float64(sum.Sent) / el.Seconds() / 1e6
	sum.Mbps = float64(sum.Bytes) * 8 / el.Seconds() / 1e6
	err = set.Close()
	sum.AccountingOK = !errors.Is(err, mq.ErrFramesLost)
	sum.Accounting = "every UMEM frame back"
	if !sum.AccountingOK {
		sum.Accounting = err.Error()
	}
	sum.CPUSeconds = (cli.CPUTime() - cpu0).Seconds()
	// A frame sent and never completed left or not: no silent success.
	// The kernel's invalid-descriptor count is the only account of such
	// frames (it skips them without a completion in zero-copy mode).
	var doneErr error
	if sum.NotCompleted > sum.TXInvalid {
		doneErr = fmt.Errorf("%d of %d frames sent were not completed within -stall %v (%d invalid descriptors): "+
			"the TX ring stalled or the bind cannot transmit", sum.NotCompleted, sum.Frames, c.stall, sum.TXInvalid)
	}
	return sum, errors.Join(runErr, doneErr, err)
}

// openSet opens the queues with the UMEM flags of cfg: a TX metadata area
// (for checksum offload) and XDP_UMEM_TX_SW_CSUM where asked. A kernel that
// refuses the flags (XDP_UMEM_TX_SW_CSUM: Linux 6.8;
// XDP_UMEM_TX_METADATA_LEN: 6.11) gets UMEMs without them, and the policy
// sums in software. The note says what was used.
func openSet(cfg *mq.Config) (*mq.Set, string, error) {
	var notes []string
	for {
		set, err := mq.Open(cfg)
		if err == nil {
			switch {
			case cfg.UMEM.TxSwCsum:
				notes = append(notes, "TX metadata, XDP_UMEM_TX_SW_CSUM")
			case cfg.UMEM.TxMetadataLen > 0:
				notes = append(notes, "TX metadata")
			default:
				notes = append(notes, "no TX metadata")
			}
			return set, strings.Join(notes, "; "), nil
		}
		switch {
		case !errors.Is(err, umem.ErrNotSupported):
			return nil, "", err
		case cfg.UMEM.TxSwCsum:
			cfg.UMEM.TxSwCsum = false
			notes = append(notes, fmt.Sprintf("without XDP_UMEM_TX_SW_CSUM (%v)", err))
		case cfg.UMEM.TxMetadataLen > 0:
			cfg.UMEM.TxMetadataLen = 0
			notes = append(notes, fmt.Sprintf("without TX metadata (%v)", err))
		default:
			return nil, "", err
		}
	}
}
