package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/nexthop"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Summary is xdpgen's final report.
type Summary struct {
	Iface, Src, Dst, DstMAC string
	Flows                   int
	Sent                    uint64 // packets queued on the TX ring
	Bytes                   uint64
	Completed               uint64 // frames the kernel completed
	Seconds                 float64
	Mpps, Mbps              float64
	Policy                  string
	PolicyReason            string
	PolicyWarning           string // set when the policy sends checksums an XDP receiver finds unfinished
	ZeroCopy                bool
	Waits                   uint64 // times no frame or ring entry was free
	Kicks                   uint64
	TXInvalid               uint64 // XDP_STATISTICS tx_invalid_descs
	TXRingEmpty             uint64
	CPUSeconds              float64
	Accounting              string
	AccountingOK            bool
}

func run(ctx context.Context, c *config) (*Summary, error) {
	ifi, err := net.InterfaceByName(c.iface)
	if err != nil {
		return nil, err
	}
	if !c.srcAddr.IsValid() || c.nextMAC == nil {
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

	u, umemNote, err := newUMEM(c)
	if err != nil {
		return nil, err
	}
	sock, err := xsk.New(c.iface, c.queue, u, &xsk.Config{NoRX: true, MaxTXBudget: 256})
	if err != nil {
		u.Close()
		return nil, fmt.Errorf("socket on %s queue %d: %w", c.iface, c.queue, err)
	}
	s, err := txpath.New(sock, &txpath.Config{Policy: c.policy, BatchSize: c.batch})
	if err != nil {
		sock.Close()
		u.Close()
		return nil, err
	}
	flows := make([]*txpath.UDPFlow, c.flows)
	for i := range flows {
		flows[i], err = txpath.NewUDPFlow(c.ifaceMAC, c.nextMAC,
			netip.AddrPortFrom(c.srcAddr, uint16(c.sport+i)), netip.AddrPortFrom(c.dstAddr, uint16(c.dport)),
			&txpath.UDPFlowConfig{TTL: uint8(c.ttl)})
		if err != nil {
			s.Close()
			sock.Close()
			u.Close()
			return nil, err
		}
	}
	dec := s.Decision()
	sum := &Summary{Iface: c.iface, Src: c.srcAddr.String(), Dst: c.dstAddr.String(), DstMAC: c.nextMAC.String(),
		Flows: c.flows, Policy: dec.Policy.String(), PolicyReason: dec.Reason, PolicyWarning: dec.Warning, ZeroCopy: sock.ZeroCopy()}
	if c.policy != txpath.Auto {
		sum.Policy = c.policy.String()
	}
	fmt.Printf("xdpgen: ready: %s -> %s via %s (%s), %d flow(s), policy %s\n", sum.Src, sum.Dst, c.iface, sum.DstMAC, c.flows, sum.Policy)
	fmt.Printf("xdpgen: %s\n", dec)
	from := "?"
	if info, err := xsk.Device(c.iface); err == nil {
		from = info.FeaturesFrom
	}
	fmt.Printf("xdpgen: kernel features: %s; UMEM %s; device facts from %s\n", sock.Features(), umemNote, from)
	if dec.Warning != "" {
		fmt.Fprintf(os.Stderr, "xdpgen: WARNING: %s\n", dec.Warning)
	}

	pps := c.pps
	if c.bps > 0 {
		avg := 0
		for _, n := range c.sizes {
			avg += n
		}
		pps = c.bps / 8 / (float64(avg) / float64(len(c.sizes)))
	}
	var sent, bytes atomic.Uint64
	if c.metrics != "" {
		addr, err := cli.ServeMetrics(ctx, c.metrics, "xdpgen", []cli.Metric{
			{Name: "sent_packets_total", Help: "Packets queued for sending.", Value: func() float64 { return float64(sent.Load()) }},
			{Name: "sent_bytes_total", Help: "Bytes queued for sending.", Value: func() float64 { return float64(bytes.Load()) }},
		})
		if err != nil {
			s.Close()
			sock.Close()
			u.Close()
			return nil, err
		}
		fmt.Printf("xdpgen: metrics on http://%s/metrics\n", addr)
	}

	stop := make(chan struct{})
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		m := cli.NewMeter()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if !c.quiet {
					fmt.Println("xdpgen:", m.Line(cli.Sample{Packets: sent.Load(), Bytes: bytes.Load()}))
				}
			}
		}
	}()

	cpu0 := cli.CPUTime()
	start := time.Now()
	g := &gen{s: s, flows: flows, sizes: c.sizes, seq: make([]uint64, c.flows),
		pat: payload.Pattern(2048), hdrLen: flows[0].HeaderLen()}
	sendErr := g.loop(ctx, c.count, pps, c.batch, &sent, &bytes)
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	derr := s.Drain(dctx)
	cancel()
	el := time.Since(start)
	close(stop)
	<-printed

	st := s.Stats()
	sum.Sent, sum.Bytes, sum.Completed = g.sent, g.bytes, st.Completed
	sum.Seconds = el.Seconds()
	sum.Mpps = float64(g.sent) / el.Seconds() / 1e6
	sum.Mbps = float64(g.bytes) * 8 / el.Seconds() / 1e6
	sum.Waits, sum.Kicks = g.waits, st.Kicks
	if x, err := sock.Stats(); err == nil {
		sum.TXInvalid, sum.TXRingEmpty = x.TXInvalidDescs, x.TXRingEmptyDescs
	}
	err = errors.Join(sendErr, derr, s.Close(), sock.Close())
	acct := u.Accounting()
	sum.Accounting, sum.AccountingOK = acct.String(), acct.Free == acct.Total
	sum.CPUSeconds = (cli.CPUTime() - cpu0).Seconds()
	err = errors.Join(err, u.Close())
	if !sum.AccountingOK {
		err = errors.Join(err, fmt.Errorf("UMEM accounting: %s", sum.Accounting))
	}
	return sum, err
}

type gen struct {
	s      *txpath.Sender
	flows  []*txpath.UDPFlow
	sizes  []int
	seq    []uint64
	pat    []byte
	hdr    [payload.HeaderLen]byte
	hdrLen int

	sent, bytes, waits uint64
	k                  int // position in sizes
}

// loop sends until count packets are out (0: no limit) or ctx ends, at pps
// packets per second (0: flat out).
func (g *gen) loop(ctx context.Context, count uint64, pps float64, batch int, sent, bytes *atomic.Uint64) error {
	start := time.Now()
	nflows := uint64(len(g.flows))
	for count == 0 || g.sent < count {
		if ctx.Err() != nil {
			return nil
		}
		burst := uint64(batch)
		if pps > 0 {
			due := uint64(pps*time.Since(start).Seconds()) + 1
			if due <= g.sent {
				if err := g.s.Flush(); err != nil {
					return err
				}
				wait := time.Duration(float64(g.sent+1-due) / pps * float64(time.Second))
				time.Sleep(max(wait, 50*time.Microsecond))
				continue
			}
			burst = min(burst, due-g.sent)
		}
		if count > 0 {
			burst = min(burst, count-g.sent)
		}
		for range burst {
			size := g.sizes[g.k]
			if g.k++; g.k == len(g.sizes) {
				g.k = 0
			}
			f := g.sent % nflows
			n := size - g.hdrLen
			seq := g.seq[f]
			payload.Put(g.hdr[:], uint16(f), n, seq)
			for {
				err := g.s.SendUDP(g.flows[f], txpath.Options{}, g.hdr[:], payload.Body(g.pat, seq, n))
				if err == nil {
					break
				}
				if !errors.Is(err, txpath.ErrNoFrames) && !errors.Is(err, txpath.ErrRingFull) {
					return err
				}
				g.waits++
				if err := g.s.Wait(ctx); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
			g.seq[f]++
			g.sent++
			g.bytes += uint64(size)
		}
		if pps > 0 {
			if err := g.s.Flush(); err != nil {
				return err
			}
		}
		sent.Store(g.sent)
		bytes.Store(g.bytes)
	}
	return g.s.Flush()
}

// newUMEM registers the UMEM with a TX metadata area (for checksum
// offload), and with XDP_UMEM_TX_SW_CSUM for the auto policy on a software
// device, where the kernel's software checksum is one of the two ways to
// right bytes (txpath.Decision picks the cheaper). A kernel that refuses
// the flags (XDP_UMEM_TX_SW_CSUM: Linux 6.8; XDP_UMEM_TX_METADATA_LEN:
// 6.11) gets a UMEM without them, and the policy sums in software. The
// note says what was used.
func newUMEM(c *config) (*umem.UMEM, string, error) {
	swCsum := false
	if c.policy == txpath.Auto {
		if info, err := xsk.Device(c.iface); err == nil {
			swCsum, _ = info.SoftwareChecksum()
		}
	}
	cfg := umem.Config{FrameSize: 2048, FrameCount: uint32(c.frames), TxMetadataLen: umem.TxMetadataSize, TxSwCsum: swCsum}
	var notes []string
	for {
		u, err := umem.New(&cfg)
		if err == nil {
			switch {
			case cfg.TxSwCsum:
				notes = append(notes, "TX metadata, XDP_UMEM_TX_SW_CSUM")
			case cfg.TxMetadataLen > 0:
				notes = append(notes, "TX metadata")
			default:
				notes = append(notes, "no TX metadata")
			}
			return u, strings.Join(notes, "; "), nil
		}
		switch {
		case !errors.Is(err, umem.ErrNotSupported):
			return nil, "", err
		case cfg.TxSwCsum:
			cfg.TxSwCsum = false
			notes = append(notes, fmt.Sprintf("without XDP_UMEM_TX_SW_CSUM (%v)", err))
		case cfg.TxMetadataLen > 0:
			cfg.TxMetadataLen = 0
			notes = append(notes, fmt.Sprintf("without TX metadata (%v)", err))
		default:
			return nil, "", err
		}
	}
}
