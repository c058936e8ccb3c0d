package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
)

const usage = `xdpfwd: forward packets between interfaces through AF_XDP, without copying payload.

Usage: xdpfwd -i IFACE [-o IFACE] [-mode l3|l2] [-dst-mac MAC] [-q N | -queues N|LIST] [-cpus LIST|none]
              [-duration D] [-metrics 127.0.0.1:PORT] [-coalesce D] [-max-delay D] [-runtime-sleep] [-max-pps PPS [-max-burst N]]`

type config struct {
	in, out      string
	qf           cli.QueueFlags
	nic          cli.NICFlags
	frameSize    int // from -frame-size and the drivers
	queues       []int
	cpus         []int // nil: not pinned
	mode         string
	dstMAC       string
	duration     time.Duration
	metrics      string
	frames       int
	ring         int
	batch        int
	icmpRate     int
	xdpMode      string
	quiet        bool
	coalesce     time.Duration
	maxDelay     time.Duration
	runtimeSleep bool
	maxPPSS      string
	maxPPS       float64 // 0: no limit
	maxBurst     float64
	dstMACVal    [6]byte
}

func main() {
	var c config
	app := cli.New("xdpfwd", usage)
	fs := app.FS
	fs.StringVar(&c.in, "i", "", "input interface (required)")
	fs.StringVar(&c.in, "iface", "", "same as -i")
	fs.StringVar(&c.out, "o", "", "output interface (default: the input interface, hairpin)")
	c.qf.Register(fs)
	c.nic.Register(fs, true)
	fs.StringVar(&c.mode, "mode", "l3", "l3 (TTL decrement, next hop from the neighbour table) or l2 (MAC rewrite)")
	fs.StringVar(&c.dstMAC, "dst-mac", "", "l2: destination MAC of frames sent out of -o (default: learned)")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long (default: until SIGINT/SIGTERM)")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on this loopback address (e.g. 127.0.0.1:9101)")
	fs.IntVar(&c.frames, "frames", 16384, "UMEM frames (of -frame-size bytes), per queue")
	fs.IntVar(&c.ring, "ring", 4096, "size of each ring (power of two)")
	fs.IntVar(&c.batch, "batch", 64, "descriptors per TX submission")
	fs.IntVar(&c.icmpRate, "icmp-rate", 100, "l3: ICMP time exceeded messages per second at most, per queue (0: none)")
	fs.StringVar(&c.xdpMode, "xdp-mode", "auto", "XDP attach mode: auto, native or generic")
	fs.BoolVar(&c.quiet, "quiet", false, "no status line per second")
	fs.DurationVar(&c.maxDelay, "max-delay", 0, "the most a packet may wait on the RX ring by the receive poller's choice (rxpath.Config.MaxDelay): the poller naps while packets flow, no longer than this; 0 (default): no naps unless -coalesce is set; negative: never")
	fs.DurationVar(&c.coalesce, "coalesce", 0, "the receive poller's nap timer while packets flow (rxpath.Config.Coalesce): alone it is its own budget; 0 its default (4 sleep costs, cut to -max-delay), negative never nap")
	fs.BoolVar(&c.runtimeSleep, "runtime-sleep", false, "the receive poller sleeps in the Go runtime's poller also while packets flow, instead of in ppoll on its own thread (rxpath.Config.RuntimeSleep): the P is free during every sleep, at more CPU per wake-up")
	fs.StringVar(&c.maxPPSS, "max-pps", "", "forward at most this many packets/s (10k, 1M), dropping the rest (a token bucket; a known bottleneck for tests and xdpndr)")
	fs.Float64Var(&c.maxBurst, "max-burst", 0, "with -max-pps: the bucket's size in packets (0: 50ms at -max-pps, at least 64): the stall of the forwarder it rides out, and the excess it lets through")
	app.Parse(os.Args[1:])

	if _, err := cli.CheckInterface(c.in); err != nil {
		app.Fail("-i: %v", err)
	}
	if c.out == "" {
		c.out = c.in
	}
	if _, err := cli.CheckInterface(c.out); err != nil {
		app.Fail("-o: %v", err)
	}
	switch c.mode {
	case "l2", "l3":
	default:
		app.Fail("-mode %q: want l2 or l3", c.mode)
	}
	if c.dstMAC != "" {
		hw, err := net.ParseMAC(c.dstMAC)
		if err != nil || len(hw) != 6 {
			app.Fail("-dst-mac %q: not a 6-byte MAC address", c.dstMAC)
		}
		copy(c.dstMACVal[:], hw)
		if c.mode != "l2" {
			app.Fail("-dst-mac is for -mode l2; l3 takes next hops from the neighbour table")
		}
	}
	if c.mode == "l2" && c.out == c.in && c.dstMAC == "" {
		app.Fail("-mode l2 on one interface needs -dst-mac")
	}
	var err error
	if c.queues, c.cpus, err = c.qf.Resolve(); err != nil {
		app.Fail("%v", err)
	}
	if c.ring < 64 || c.ring&(c.ring-1) != 0 {
		app.Fail("-ring %d: want a power of two >= 64", c.ring)
	}
	if c.batch < 1 || c.batch > c.ring {
		app.Fail("-batch %d: want 1..%d", c.batch, c.ring)
	}
	if c.frames < 4*c.ring {
		app.Fail("-frames %d: want at least 4 x -ring (%d)", c.frames, 4*c.ring)
	}
	if c.duration < 0 {
		app.Fail("-duration %v: must be positive", c.duration)
	}
	if c.icmpRate < 0 {
		app.Fail("-icmp-rate %d: must be >= 0", c.icmpRate)
	}
	if c.maxPPSS != "" {
		v, err := cli.ParseRate(c.maxPPSS)
		if err != nil {
			app.Fail("-max-pps %v", err)
		}
		c.maxPPS = v
		if c.maxBurst == 0 {
			c.maxBurst = max(64, v/20)
		}
	}
	if c.maxBurst < 0 || c.maxBurst > 0 && c.maxPPS == 0 {
		app.Fail("-max-burst %v: goes with -max-pps, at least 1", c.maxBurst)
	}
	if err := cli.CheckMetricsAddr(c.metrics); err != nil {
		app.Fail("%v", err)
	}
	switch strings.ToLower(c.xdpMode) {
	case "auto", "native", "generic":
	default:
		app.Fail("-xdp-mode %q: want auto, native or generic", c.xdpMode)
	}

	ctx, cancel := cli.RunContext(c.duration)
	defer cancel()
	sum, err := run(ctx, &c)
	if sum != nil {
		cli.Summary(sum)
	}
	if err != nil {
		app.Fatal(err)
	}
	if !sum.AccountingOK {
		app.Fatal(fmt.Errorf("UMEM accounting: %s", sum.Accounting))
	}
}
