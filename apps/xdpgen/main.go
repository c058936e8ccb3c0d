package main

import (
	"encoding/hex"
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
	"github.com/xdpkit/xdpkit/apps/internal/craft"
	"github.com/xdpkit/xdpkit/txpath"
)

const usage = `xdpgen: send traffic through an AF_XDP socket: UDP, TCP SYNs, ICMP echo requests, raw frames, or a pcap replay.

Usage: xdpgen -i IFACE -dst ADDR[/LEN] [-mode udp|tcp-syn|icmp-echo|raw|pcap] [-q N | -queues N|LIST] [-cpus LIST|none]
              [-rate PPS|BPS|max] [-rate-layer l2|l1] [-count N] [-duration D] [-size N|LIST|imix]
              [-flows N] [-sport N[-M]] [-dport N[-M]] [-src ADDR[/LEN]] [-order sequential|random] [-seed N] [-vlan ID[,ID]]
              [-ipv6] [-policy auto|offload|software|nt|plain] [-dst-mac MAC] [-timestamp] [-stall D]
       xdpgen -i IFACE -mode raw -dst-mac MAC [-ethertype 0x88b5] [-pattern HEX] ...
       xdpgen -i IFACE -mode pcap -pcap FILE (-dst ADDR | -dst-mac MAC) [-pcap-timing rate|original] [-loop N]
              [-pcap-keep-macs] [-pcap-rewrite-ip -src ADDR] ...`

type config struct {
	iface        string
	qf           cli.QueueFlags
	nic          cli.NICFlags
	txProgS      string
	queues       []int
	cpus         []int // nil: not pinned
	src, dst     string
	dstMAC       string
	sport, dport int // the first ports of -sport and -dport
	sportS       string
	dportS       string
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
	flowsSet     bool // -flows was given

	modeS      string
	vlanS      string
	orderS     string
	etherS     string
	patternS   string
	rateLayer  string
	seed       uint64
	pcap       string
	pcapTiming string
	loops      int
	keepMACs   bool
	rewriteIP  bool

	mode      craft.Mode
	pcapMode  bool
	engine    bool // frames from the field engine (craft) or a pcap file, not UDPFlow templates
	vlans     []uint16
	srcPfx    netip.Prefix
	dstPfx    netip.Prefix
	sports    craft.PortRange
	dports    craft.PortRange
	order     craft.Order
	ethertype uint16
	pattern   []byte
	l1        bool

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
	fs.StringVar(&c.sportS, "sport", "10000", "source port, or a range 10000-10999 (ICMP echo: the identifier); with one port, flow i uses sport+i")
	fs.StringVar(&c.dportS, "dport", "9000", "destination port, or a range 9000-9099")
	fs.IntVar(&c.flows, "flows", 1, "number of flows (source ports), sent round-robin")
	fs.StringVar(&c.modeS, "mode", "udp", "what to send: udp, tcp-syn, icmp-echo, raw, pcap")
	fs.StringVar(&c.vlanS, "vlan", "", "VLAN tag 100 (802.1Q), or two 100,200 (QinQ: 802.1ad outer, 802.1Q inner)")
	fs.StringVar(&c.orderS, "order", "sequential", "order of the field engine's combinations: sequential or random")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of -order random and of TCP sequence numbers (the same seed repeats a run)")
	fs.StringVar(&c.etherS, "ethertype", "0x88b5", "EtherType of -mode raw")
	fs.StringVar(&c.patternS, "pattern", "", "payload of -mode raw in hex, repeated (default: bytes 00 01 02 ...)")
	fs.StringVar(&c.pcap, "pcap", "", "pcap or pcapng file to replay (-mode pcap; read as a stream)")
	fs.StringVar(&c.pcapTiming, "pcap-timing", "rate", "pcap replay at -rate, or with the capture's own timing (original)")
	fs.IntVar(&c.loops, "loop", 1, "times to replay the pcap file (0: until -count, -duration or Ctrl-C)")
	fs.BoolVar(&c.keepMACs, "pcap-keep-macs", false, "send the captured MAC addresses (default: this interface's and the next hop's)")
	fs.BoolVar(&c.rewriteIP, "pcap-rewrite-ip", false, "set the IP addresses of replayed packets of -dst's family to -src and -dst (checksums updated)")
	fs.StringVar(&c.rateLayer, "rate-layer", "l2", "what a bit rate counts: l2 (frame bytes as written, no FCS) or l1 (plus 24 bytes of preamble, FCS and inter-frame gap)")
	fs.StringVar(&c.rateS, "rate", "10k", "packets per second (10k, 1M), bit rate (500Mbps, 1Gbps; see -rate-layer) or max")
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
	fs.Visit(func(f *flag.Flag) {
		c.sizeSet = c.sizeSet || f.Name == "size"
		c.flowsSet = c.flowsSet || f.Name == "flows"
	})
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
	if err := c.checkMode(); err != nil {
		return err
	}
	if c.dstMAC != "" {
		if c.nextMAC, err = net.ParseMAC(c.dstMAC); err != nil || len(c.nextMAC) != 6 {
			return fmt.Errorf("-dst-mac %q: not a 6-byte MAC address", c.dstMAC)
		}
	}
	// IP addresses: every mode but raw and pcap sends them; those need
	// -dst only for the next hop's MAC (or -pcap-rewrite-ip).
	ipless := c.mode == craft.Raw || c.pcapMode
	if c.dst == "" {
		if !ipless || c.rewriteIP {
			return fmt.Errorf("-dst: required")
		}
		if c.nextMAC == nil && !(c.pcapMode && c.keepMACs) {
			return fmt.Errorf("-dst or -dst-mac: required (the next hop's MAC)")
		}
	} else {
		if c.dstPfx, c.dstAddr, err = craft.ParsePrefix(c.dst); err != nil {
			return fmt.Errorf("-dst %q: not an IP address or prefix", c.dst)
		}
		if c.ipv6 && !c.dstAddr.Is6() {
			return fmt.Errorf("-ipv6 with an IPv4 -dst %s", c.dstAddr)
		}
	}
	if c.src != "" {
		if c.srcPfx, c.srcAddr, err = craft.ParsePrefix(c.src); err != nil {
			return fmt.Errorf("-src %q: not an IP address or prefix", c.src)
		}
		if c.dstAddr.IsValid() && c.srcAddr.Is4() != c.dstAddr.Is4() {
			return fmt.Errorf("-src %s and -dst %s are of different families", c.srcAddr, c.dstAddr)
		}
	}
	if c.rewriteIP && (!c.pcapMode || c.src == "") {
		return fmt.Errorf("-pcap-rewrite-ip: for -mode pcap, with -src and -dst")
	}
	if c.sports, err = craft.ParsePortRange(c.sportS); err != nil {
		return fmt.Errorf("-sport %q: want a port 1..65535 or a range N-M", c.sportS)
	}
	if c.dports, err = craft.ParsePortRange(c.dportS); err != nil {
		return fmt.Errorf("-dport %q: want a port 1..65535 or a range N-M", c.dportS)
	}
	c.sport, c.dport = int(c.sports.First), int(c.dports.First)
	if c.flows < 1 || c.flows > 65536 || c.sport+c.flows-1 > 65535 {
		return fmt.Errorf("-flows %d: want 1..%d with -sport %d", c.flows, 65536-c.sport, c.sport)
	}
	if c.flowsSet && c.sports.Last != c.sports.First {
		return fmt.Errorf("-flows with a -sport range: the range sets the flows")
	}
	if c.vlans, err = craft.ParseVLANs(c.vlanS); err != nil {
		return fmt.Errorf("-vlan %q: want one or two VLAN IDs 1..4094", c.vlanS)
	}
	if c.order, err = craft.ParseOrder(c.orderS); err != nil {
		return fmt.Errorf("-order %q: want sequential or random", c.orderS)
	}
	if c.rateLayer != "l2" && c.rateLayer != "l1" {
		return fmt.Errorf("-rate-layer %q: want l2 or l1", c.rateLayer)
	}
	c.l1 = c.rateLayer == "l1"
	if err := c.parseRate(); err != nil {
		return err
	}
	c.engine = c.mode != craft.UDP || c.pcapMode || len(c.vlans) > 0 || c.order == craft.Random ||
		c.sports.Last != c.sports.First || c.dports.First != c.dports.Last ||
		c.dstPfx.IsValid() && c.dstPfx.Bits() != c.dstPfx.Addr().BitLen() ||
		c.srcPfx.IsValid() && c.srcPfx.Bits() != c.srcPfx.Addr().BitLen()
	if c.pcapMode && (len(c.vlans) > 0 || c.order == craft.Random || c.sports.First != c.sports.Last || c.dports.First != c.dports.Last ||
		c.flowsSet || c.dstPfx.IsValid() && c.dstPfx.Bits() != c.dstPfx.Addr().BitLen()) {
		return fmt.Errorf("-mode pcap sends the file's packets: -vlan, -order, port ranges, -flows and a -dst prefix do not apply")
	}
	if c.mode == craft.Raw && !c.pcapMode && (c.order == craft.Random || c.sports.First != c.sports.Last || c.dports.First != c.dports.Last || c.flowsSet) {
		return fmt.Errorf("-mode raw has no IP header: -order, port ranges and -flows do not apply")
	}
	if c.engine && c.timestamp {
		return fmt.Errorf("-timestamp: only for UDP without the field engine's options (-vlan, ranges, prefixes, -order random)")
	}
	if c.engine && c.sports.First == c.sports.Last && c.flows > 1 {
		c.sports.Last = c.sports.First + uint16(c.flows-1)
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

// checkMode reads -mode and the options of raw and pcap.
func (c *config) checkMode() error {
	var err error
	if c.modeS == "pcap" {
		c.pcapMode, c.mode = true, craft.Raw
		if c.pcap == "" {
			return fmt.Errorf("-mode pcap: -pcap FILE required")
		}
		if c.pcapTiming != "rate" && c.pcapTiming != "original" {
			return fmt.Errorf("-pcap-timing %q: want rate or original", c.pcapTiming)
		}
		if c.loops < 0 {
			return fmt.Errorf("-loop %d: want 0 (no end) or more", c.loops)
		}
		if len(c.queues) > 1 {
			return fmt.Errorf("-mode pcap: one queue (the file is replayed in order)")
		}
		return nil
	}
	if c.pcap != "" {
		return fmt.Errorf("-pcap: with -mode pcap")
	}
	if c.mode, err = craft.ParseMode(c.modeS); err != nil {
		return fmt.Errorf("-mode %q: want udp, tcp-syn, icmp-echo, raw or pcap", c.modeS)
	}
	if c.mode == craft.Raw {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(c.etherS), "0x"), 16, 16)
		if err != nil || v < 0x0600 {
			return fmt.Errorf("-ethertype %q: want a hex EtherType 0x0600..0xffff", c.etherS)
		}
		c.ethertype = uint16(v)
		if c.pattern, err = hex.DecodeString(strings.TrimPrefix(c.patternS, "0x")); err != nil {
			return fmt.Errorf("-pattern %q: want hex bytes", c.patternS)
		}
	}
	return nil
}

func (c *config) parseSizes() error {
	s := strings.ToLower(strings.TrimSpace(c.sizeS))
	hdr := 42
	if c.dstAddr.Is6() {
		hdr = 62
	}
	vlan := 4 * len(c.vlans)
	minSize := hdr + 16 + vlan // headers and the payload header
	switch {
	case c.pcapMode:
		return nil // the file's
	case c.mode == craft.TCPSyn:
		n := hdr - 8 + 40 + vlan // a SYN with Linux's 20 bytes of options
		if c.sizeSet {
			return fmt.Errorf("-size: tcp-syn frames are %d bytes (the SYN a Linux stack sends)", n)
		}
		c.sizes = []int{n}
		return nil
	case c.mode == craft.ICMPEcho:
		minSize = hdr + vlan
	case c.mode == craft.Raw:
		minSize = 14 + vlan
	}
	if c.timestamp {
		minSize += 8 // and the send time
		if !c.sizeSet {
			s = strconv.Itoa(max(64, minSize)) // the default, raised to fit
		}
	}
	// A tag is not in the MTU, but the kernel forwards MTU+14+4 bytes at
	// most (is_skb_forwardable), also with QinQ's two tags.
	maxSize := c.mtu + 14 + min(vlan, 4)
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
			return fmt.Errorf("-size %d: below the %d bytes of the %s headers", n, minSize, c.mode)
		}
		if n > maxSize {
			return fmt.Errorf("-size %d: above the %d-byte MTU of %s (at most %d bytes with the Ethernet header and VLAN tags)", n, c.mtu, c.iface, maxSize)
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
