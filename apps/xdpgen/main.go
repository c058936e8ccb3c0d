package main

import (
	"flag"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/txpath"
)

const usage = `xdpgen: send UDP traffic through an AF_XDP socket.

Usage: xdpgen -i IFACE -dst ADDR [-q N | -queues N|LIST] [-cpus LIST|none] [-rate PPS|BPS|max] [-count N] [-duration D] [-size N|LIST|imix]
              [-flows N] [-ipv6] [-policy auto|offload|software|nt|plain] [-src ADDR] [-dst-mac MAC] [-timestamp] [-stall D]`

type config struct {
	iface        string
	qf           cli.QueueFlags
	nic          cli.NICFlags
	txProgS      string
	queues       []int
	cpus         []int // nil: not pinned
	src, dst     string
	dstMAC       string
	sport, dport int
	flows        int
	rateS, sizeS string
	count        uint64
	duration     time.Duration
	stall        time.Duration
	ipv6         bool
	policyS      string
	batch        int
	frames       int
	ttl          int
	metrics      string
	quiet        bool
	timestamp    bool
	sizeSet      bool // -size was given

	pps      float64 // 0: flat out
	bps      float64
	sizes    []int // frame lengths, one entry per packet of the cycle
	policy   txpath.Policy
	srcAddr  netip.Addr
	dstAddr  netip.Addr
	nextMAC  net.HardwareAddr
	mtu      int
	ifaceMAC net.HardwareAddr
}

func main() {
	var c config
	app := cli.New("xdpgen", usage)
	fs := app.FS
	fs.StringVar(&c.iface, "i", "", "interface to send on (required)")
	fs.StringVar(&c.iface, "iface", "", "same as -i")
	c.qf.Register(fs)
	c.nic.Register(fs, false)
	fs.StringVar(&c.txProgS, "tx-program", "auto", "native pass-everything XDP program for zero-copy TX: auto (where the driver needs one), always, never")
	fs.StringVar(&c.dst, "dst", "", "destination address (required)")
	fs.StringVar(&c.src, "src", "", "source address (default: the route's preferred source)")
	fs.StringVar(&c.dstMAC, "dst-mac", "", "next hop MAC (default: from the neighbour table)")
	fs.IntVar(&c.sport, "sport", 10000, "first UDP source port; flow i uses sport+i")
	fs.IntVar(&c.dport, "dport", 9000, "UDP destination port")
	fs.IntVar(&c.flows, "flows", 1, "number of flows (source ports), sent round-robin")
	fs.StringVar(&c.rateS, "rate", "10k", "packets per second (10k, 1M), bit rate (500Mbps, 1Gbps) or max")
	fs.Uint64Var(&c.count, "count", 0, "stop after this many packets (0: no limit)")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long of sending, counted from the end of set-up (0: no limit)")
	fs.DurationVar(&c.stall, "stall", 5*time.Second, "fail when frames in flight see no completion for this long, and when the last frames are not completed within it after the run")
	fs.StringVar(&c.sizeS, "size", "64", "frame length without FCS, a list 64,594,1514 (weights 64:7), or imix")
	fs.BoolVar(&c.ipv6, "ipv6", false, "IPv6 (when -dst is a name or omitted family matters: requires an IPv6 -dst)")
	fs.StringVar(&c.policyS, "policy", "auto", "copy and checksum policy: auto, offload, software, nt, plain")
	fs.IntVar(&c.batch, "batch", 64, "packets per TX submission")
	fs.IntVar(&c.frames, "frames", 4096, "UMEM frames (of -frame-size bytes), per queue")
	fs.IntVar(&c.ttl, "ttl", 64, "IPv4 TTL / IPv6 hop limit")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on this loopback address (e.g. 127.0.0.1:9102)")
	fs.BoolVar(&c.quiet, "quiet", false, "no status line per second")
	fs.BoolVar(&c.timestamp, "timestamp", false, "write the send time (CLOCK_TAI) into every payload, for xdprecv's latency")
	app.Parse(os.Args[1:])
	fs.Visit(func(f *flag.Flag) { c.sizeSet = c.sizeSet || f.Name == "size" })
	if err := c.check(); err != nil {
		app.Fail("%v", err)
	}

	// -duration counts from the end of set-up (run starts it).
	ctx, cancel := cli.SignalContext()
	defer cancel()
	sum, err := run(ctx, &c)
	if sum != nil {
		cli.Summary(sum)
	}
	if err != nil {
		app.Fatal(err)
	}
}

// check validates the flags and fills the derived fields.
func (c *config) check() error {
	ifi, err := cli.CheckInterface(c.iface)
	if err != nil {
		return fmt.Errorf("-i: %w", err)
	}
	c.mtu, c.ifaceMAC = ifi.MTU, ifi.HardwareAddr
	if len(c.ifaceMAC) != 6 {
		return fmt.Errorf("-i %s: not an Ethernet interface", c.iface)
	}
	if c.queues, c.cpus, err = c.qf.Resolve(); err != nil {
		return err
	}
	if c.dst == "" {
		return fmt.Errorf("-dst: required")
	}
	if c.dstAddr, err = netip.ParseAddr(c.dst); err != nil {
		return fmt.Errorf("-dst %q: not an IP address", c.dst)
	}
	c.dstAddr = c.dstAddr.Unmap()
	if c.ipv6 && !c.dstAddr.Is6() {
		return fmt.Errorf("-ipv6 with an IPv4 -dst %s", c.dstAddr)
	}
	if c.src != "" {
		if c.srcAddr, err = netip.ParseAddr(c.src); err != nil {
			return fmt.Errorf("-src %q: not an IP address", c.src)
		}
		c.srcAddr = c.srcAddr.Unmap()
		if c.srcAddr.Is4() != c.dstAddr.Is4() {
			return fmt.Errorf("-src %s and -dst %s are of different families", c.srcAddr, c.dstAddr)
		}
	}
	if c.dstMAC != "" {
		if c.nextMAC, err = net.ParseMAC(c.dstMAC); err != nil || len(c.nextMAC) != 6 {
			return fmt.Errorf("-dst-mac %q: not a 6-byte MAC address", c.dstMAC)
		}
	}
	if c.sport < 1 || c.sport > 65535 || c.dport < 1 || c.dport > 65535 {
		return fmt.Errorf("-sport %d / -dport %d: ports are 1..65535", c.sport, c.dport)
	}
	if c.flows < 1 || c.flows > 65536 || c.sport+c.flows-1 > 65535 {
		return fmt.Errorf("-flows %d: want 1..%d with -sport %d", c.flows, 65536-c.sport, c.sport)
	}
	if err := c.parseRate(); err != nil {
		return err
	}
	if err := c.parseSizes(); err != nil {
		return err
	}
	if c.policy, err = txpath.ParsePolicy(c.policyS); err != nil {
		return fmt.Errorf("-policy %q: want auto, offload, software, nt or plain", c.policyS)
	}
	if c.policy == txpath.Plain && c.dstAddr.Is6() {
		return fmt.Errorf("-policy plain: UDP over IPv6 needs a checksum")
	}
	if c.batch < 1 || c.batch > 1024 {
		return fmt.Errorf("-batch %d: want 1..1024", c.batch)
	}
	if c.frames < 2*c.batch || c.frames&(c.frames-1) != 0 {
		return fmt.Errorf("-frames %d: want a power of two >= 2 x -batch", c.frames)
	}
	if c.ttl < 1 || c.ttl > 255 {
		return fmt.Errorf("-ttl %d: want 1..255", c.ttl)
	}
	if c.duration < 0 {
		return fmt.Errorf("-duration %v: must be positive", c.duration)
	}
	if c.stall <= 0 {
		return fmt.Errorf("-stall %v: must be positive", c.stall)
	}
	return cli.CheckMetricsAddr(c.metrics)
}

func (c *config) parseRate() error {
	s := strings.ToLower(strings.TrimSpace(c.rateS))
	if s == "max" {
		return nil
	}
	bad := fmt.Errorf("-rate %q: want a positive rate: 10000, 10k, 1M (packets/s), 500Mbps, 1Gbps, or max", c.rateS)
	unit := 1.0
	bits := false
	for _, suf := range []struct {
		s    string
		mult float64
		bits bool
	}{{"gbps", 1e9, true}, {"mbps", 1e6, true}, {"kbps", 1e3, true}, {"bps", 1, true}, {"pps", 1, false}} {
		if strings.HasSuffix(s, suf.s) {
			s, unit, bits = strings.TrimSuffix(s, suf.s), suf.mult, suf.bits
			break
		}
	}
	if !bits {
		switch {
		case strings.HasSuffix(s, "k"):
			s, unit = strings.TrimSuffix(s, "k"), 1e3
		case strings.HasSuffix(s, "m"):
			s, unit = strings.TrimSuffix(s, "m"), 1e6
		case strings.HasSuffix(s, "g"):
			s, unit = strings.TrimSuffix(s, "g"), 1e9
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return bad
	}
	if bits {
		c.bps = v * unit
	} else {
		c.pps = v * unit
	}
	return nil
}

func (c *config) parseSizes() error {
	s := strings.ToLower(strings.TrimSpace(c.sizeS))
	hdr := 42
	if c.dstAddr.Is6() {
		hdr = 62
	}
	minSize := hdr + 16 // headers and the payload header
	if c.timestamp {
		minSize += 8 // and the send time
		if !c.sizeSet {
			s = strconv.Itoa(max(64, minSize)) // the default, raised to fit
		}
	}
	maxSize := c.mtu + 14
	if s == "imix" {
		// The simple IMIX, 7:4:1, its smallest frame raised to what the
		// headers need (78 bytes over IPv6), its largest capped by the MTU.
		s = fmt.Sprintf("%d:7,594:4,%d:1", max(64, minSize), min(1514, maxSize))
	}
	for _, part := range strings.Split(s, ",") {
		sz, w := part, "1"
		if a, b, ok := strings.Cut(part, ":"); ok {
			sz, w = a, b
		}
		n, err := strconv.Atoi(strings.TrimSpace(sz))
		if err != nil {
			return fmt.Errorf("-size %q: want a frame length, a list 64,594,1514 (weights 64:7) or imix", c.sizeS)
		}
		weight, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || weight < 1 || weight > 1000 {
			return fmt.Errorf("-size %q: weight %q must be 1..1000", c.sizeS, w)
		}
		if n < minSize {
			return fmt.Errorf("-size %d: below the %d bytes of Ethernet, IP, UDP and payload headers", n, minSize)
		}
		if n > maxSize {
			return fmt.Errorf("-size %d: above the %d-byte MTU of %s (at most %d bytes with the Ethernet header)", n, c.mtu, c.iface, maxSize)
		}
		if n > 9216 {
			return fmt.Errorf("-size %d: above txpath's 9216-byte largest packet", n)
		}
		for range weight {
			c.sizes = append(c.sizes, n)
		}
	}
	return nil
}
