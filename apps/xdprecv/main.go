// Command xdprecv receives UDP traffic through an AF_XDP socket with the
// budgeted poller (rxpath), counts it and verifies it: IPv4 header and UDP
// checksums, and for xdpgen's payloads the sequence numbers per flow
// (gaps, late arrivals) and the payload pattern. It can write what arrives
// into a pcap file.
//
// The XDP program sends the UDP datagrams to -port (all UDP with -port 0)
// to the socket; everything else goes on to the kernel.
//
// Kernel: Linux 6.6 or later (AF_XDP with need_wakeup); the XDP program is
// attached as a bpf_link (5.9), through rtnetlink on kernels without XDP
// links; the "kernel features" line says what was used. Root or
// CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK.
//
// A UDP checksum field that holds the pseudo-header sum (a sender behind a
// software device offloaded it and nothing finished it) is counted as
// PartialUDPCsum, not as bad, and the datagram is checked further.
//
// Run:
//
//	xdprecv -i eth1                          # until SIGINT/SIGTERM
//	xdprecv -i eth1 -count 1000000 -pcap /tmp/rx.pcap -snaplen 128
//	xdprecv -i eth1 -port 0 -duration 10s -metrics 127.0.0.1:9103
//
// The pcap file is the classic libpcap format (24-byte global header,
// magic 0xa1b2c3d4 in host byte order, version 2.4, microsecond
// timestamps, link type 1 = Ethernet; then a 16-byte record header per
// packet: seconds, microseconds, captured length, original length).
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
)

const usage = `xdprecv: receive, count and verify UDP traffic through AF_XDP.

Usage: xdprecv -i IFACE [-port N] [-count N] [-duration D] [-pcap FILE] [-snaplen N] [-metrics 127.0.0.1:PORT]`

type config struct {
	iface    string
	queue    int
	port     int
	count    uint64
	duration time.Duration
	pcap     string
	snaplen  int
	metrics  string
	frames   int
	ring     int
	xdpMode  string
	quiet    bool
}

func main() {
	var c config
	app := cli.New("xdprecv", usage)
	fs := app.FS
	fs.StringVar(&c.iface, "i", "", "interface to receive on (required)")
	fs.StringVar(&c.iface, "iface", "", "same as -i")
	fs.IntVar(&c.queue, "q", 0, "queue")
	fs.IntVar(&c.queue, "queue", 0, "same as -q")
	fs.IntVar(&c.port, "port", 9000, "UDP destination port to take (0: every UDP datagram)")
	fs.Uint64Var(&c.count, "count", 0, "stop after this many generator packets (0: no limit)")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long (0: until SIGINT/SIGTERM)")
	fs.StringVar(&c.pcap, "pcap", "", "write received packets to this pcap file")
	fs.IntVar(&c.snaplen, "snaplen", 65535, "bytes of each packet written to the pcap file")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on this loopback address (e.g. 127.0.0.1:9103)")
	fs.IntVar(&c.frames, "frames", 8192, "UMEM frames (2048 bytes each)")
	fs.IntVar(&c.ring, "ring", 4096, "RX and Fill ring size (power of two)")
	fs.StringVar(&c.xdpMode, "xdp-mode", "auto", "XDP attach mode: auto, native or generic")
	fs.BoolVar(&c.quiet, "quiet", false, "no status line per second")
	app.Parse(os.Args[1:])

	if _, err := cli.CheckInterface(c.iface); err != nil {
		app.Fail("-i: %v", err)
	}
	switch {
	case c.queue < 0:
		app.Fail("-q %d: must be >= 0", c.queue)
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
	}
	switch strings.ToLower(c.xdpMode) {
	case "auto", "native", "generic":
	default:
		app.Fail("-xdp-mode %q: want auto, native or generic", c.xdpMode)
	}
	if err := cli.CheckMetricsAddr(c.metrics); err != nil {
		app.Fail("%v", err)
	}

	ctx, cancel := cli.RunContext(c.duration)
	defer cancel()
	sum, err := run(ctx, cancel, &c)
	if sum != nil {
		cli.Summary(sum)
	}
	if err != nil {
		app.Fatal(err)
	}
	if sum != nil && !sum.AccountingOK {
		app.Fatal(fmt.Errorf("UMEM accounting: %s", sum.Accounting))
	}
}
