package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
)

const usage = `xdprecv: receive, count and verify UDP traffic (and TCP SYNs, ICMP echoes, raw frames) through AF_XDP.

Usage: xdprecv -i IFACE [-q N | -queues N|LIST] [-cpus LIST|none] [-port N] [-count N] [-duration D] [-pcap FILE] [-snaplen N] [-metrics 127.0.0.1:PORT]
               [-latency [-latency-clock auto|device|xdp|user]] [-coalesce D] [-max-delay D] [-runtime-sleep] [-napi-defer N -napi-gro-flush D]
               [-json] [-tcp] [-all]`

type config struct {
	iface        string
	qf           cli.QueueFlags
	nic          cli.NICFlags
	queues       []int
	cpus         []int // nil: not pinned
	port         int
	count        uint64
	duration     time.Duration
	pcap         string
	snaplen      int
	metrics      string
	frames       int
	ring         int
	xdpMode      string
	quiet        bool
	coalesce     time.Duration
	maxDelay     time.Duration
	runtimeSleep bool
	// napiDefer and napiFlush: the interface's NAPI deferral while
	// xdprecv runs (napiDefer < 0: left as it is).
	napiDefer int
	napiFlush time.Duration
	latency   bool
	clockS    string
	clock     int
	json      bool
	tcp       bool
	all       bool
}

func main() {
	var c config
	app := cli.New("xdprecv", usage)
	fs := app.FS
	fs.StringVar(&c.iface, "i", "", "interface to receive on (required)")
	fs.StringVar(&c.iface, "iface", "", "same as -i")
	c.qf.Register(fs)
	c.nic.Register(fs, true)
	fs.IntVar(&c.port, "port", 9000, "UDP destination port to take (0: every UDP datagram)")
	fs.Uint64Var(&c.count, "count", 0, "stop after this many generator packets (0: no limit)")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long (0: until SIGINT/SIGTERM)")
	fs.StringVar(&c.pcap, "pcap", "", "write received packets to this pcap file")
	fs.IntVar(&c.snaplen, "snaplen", 65535, "bytes of each packet written to the pcap file")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on this loopback address (e.g. 127.0.0.1:9103)")
	fs.IntVar(&c.frames, "frames", 8192, "UMEM frames (of -frame-size bytes), per queue")
	fs.IntVar(&c.ring, "ring", 4096, "RX and Fill ring size (power of two)")
	fs.StringVar(&c.xdpMode, "xdp-mode", "auto", "XDP attach mode: auto, native or generic")
	fs.BoolVar(&c.quiet, "quiet", false, "no status line per second")
	fs.DurationVar(&c.maxDelay, "max-delay", 0, "the most a packet may wait on the RX ring by the receive poller's choice (rxpath.Config.MaxDelay): the poller naps while packets flow, no longer than this; 0 (default): no naps unless -coalesce is set; negative: never")
	fs.DurationVar(&c.coalesce, "coalesce", 0, "the receive poller's nap timer while packets flow (rxpath.Config.Coalesce): alone it is its own budget; 0 its default (4 sleep costs, cut to -max-delay), negative never nap")
	fs.BoolVar(&c.runtimeSleep, "runtime-sleep", false, "the receive poller sleeps in the Go runtime's poller also while packets flow, instead of in ppoll on its own thread (rxpath.Config.RuntimeSleep): the P is free during every sleep, at more CPU per wake-up")
	fs.IntVar(&c.napiDefer, "napi-defer", -1, "while xdprecv runs, the interface's napi_defer_hard_irqs (xsk.SetNAPIDeferral; with -napi-gro-flush): the kernel hands the RX ring batches, one wake-up each (-1: leave it)")
	fs.DurationVar(&c.napiFlush, "napi-gro-flush", -1, "while xdprecv runs, the interface's gro_flush_timeout: a packet may wait that long (with -napi-defer; -1: leave it)")
	fs.BoolVar(&c.latency, "latency", false, "measure the one-way latency of xdpgen -timestamp packets (turns on RX metadata)")
	fs.StringVar(&c.clockS, "latency-clock", "auto", "receive time for -latency: auto, device (RX timestamp), xdp (XDP hook time) or user")
	fs.BoolVar(&c.json, "json", false, "standard output as JSON lines: ready, one interval line per second, the summary (other words go to stderr)")
	fs.BoolVar(&c.tcp, "tcp", false, "also take TCP (to -port, all TCP with -port 0) and count SYNs, SYN-ACKs and their flows")
	fs.BoolVar(&c.all, "all", false, "take every frame on the queue (no XDP filter): ICMP and ICMPv6 echoes, ARP, any EtherType; the kernel then sees none of it")
	app.Parse(os.Args[1:])

	if _, err := cli.CheckInterface(c.iface); err != nil {
		app.Fail("-i: %v", err)
	}
	var err error
	if c.queues, c.cpus, err = c.qf.Resolve(); err != nil {
		app.Fail("%v", err)
	}
	switch {
	case len(c.queues) > 1 && c.pcap != "":
		app.Fail("-pcap takes one queue (-q), not -queues")
	case c.port < 0 || c.port > 65535:
		app.Fail("-port %d: want 0..65535", c.port)
	case c.snaplen < 14 || c.snaplen > 262144:
		app.Fail("-snaplen %d: want 14..262144", c.snaplen)
	case c.ring < 64 || c.ring&(c.ring-1) != 0:
		app.Fail("-ring %d: want a power of two >= 64", c.ring)
	case c.frames < 2*c.ring:
		app.Fail("-frames %d: want at least 2 x -ring (%d)", c.frames, 2*c.ring)
	case c.duration < 0:
		app.Fail("-duration %v: must be positive", c.duration)
	case c.napiDefer < -1 || c.napiFlush < 0 && c.napiFlush != -1:
		app.Fail("-napi-defer %d, -napi-gro-flush %v: want 0 or more (-1: leave it)", c.napiDefer, c.napiFlush)
	case (c.napiDefer >= 0) != (c.napiFlush >= 0):
		app.Fail("-napi-defer and -napi-gro-flush go together")
	case c.napiDefer > math.MaxInt32:
		app.Fail("-napi-defer %d: want 0..%d", c.napiDefer, math.MaxInt32)
	}
	switch strings.ToLower(c.xdpMode) {
	case "auto", "native", "generic":
	default:
		app.Fail("-xdp-mode %q: want auto, native or generic", c.xdpMode)
	}
	if c.clock, err = parseClock(c.clockS); err != nil {
		app.Fail("%v", err)
	}
	if err := cli.CheckMetricsAddr(c.metrics); err != nil {
		app.Fail("%v", err)
	}

	ctx, cancel := cli.RunContext(c.duration)
	defer cancel()
	sum, err := run(ctx, cancel, &c)
	switch {
	case sum != nil && c.json:
		if sum.Latency != nil {
			fmt.Fprintln(os.Stderr, "xdprecv:", sum.Latency)
		}
		jsonLine(summaryLine{Type: "summary", Summary: sum})
	case sum != nil:
		if sum.Latency != nil {
			fmt.Println("xdprecv:", sum.Latency)
		}
		cli.Summary(sum)
	}
	if err != nil {
		app.Fatal(err)
	}
	if sum != nil && !sum.AccountingOK {
		app.Fatal(fmt.Errorf("UMEM accounting: %s", sum.Accounting))
	}
}
