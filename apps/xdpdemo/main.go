package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

const usage = `xdpdemo: generator -> forwarder -> receiver on a three-namespace veth topology.

Usage: xdpdemo [-bin DIR] [-rate R] [-duration D] [-size N] [-flows N] [-ipv6] [-policy P] [-queues N] [-bench] [-soak [-flap D]] [-quiet]`

type config struct {
	bin      string
	rate     string
	duration time.Duration
	size     string
	flows    int
	ipv6     bool
	policy   string
	queues   int
	bench    bool
	soak     bool
	flap     time.Duration
	quiet    bool
}

// The programs' summaries, the fields the demo prints.
type genSummary struct {
	Sent, Completed, Waits uint64
	Seconds, Mpps, Mbps    float64
	Policy, PolicyReason   string
	TXInvalid              uint64
	AccountingOK           bool
	Queues                 []queueSummary
}

// queueSummary is one queue's share in any of the three summaries.
type queueSummary struct {
	Queue, CPU             int
	Sent, Forwarded, Valid uint64
	CPUSeconds             float64
}

type fwdSummary struct {
	Received, Forwarded, TTLExpired, NoRoute, NoNeighbour, NotRoutable, ParseErrors, TXRingFull uint64
	Seconds, Mpps, CPUSeconds                                                                   float64
	AttachMode                                                                                  string
	XDP                                                                                         []struct {
		Iface                                         string
		RXDropped, RXRingFull, RXFillEmpty, TXInvalid uint64
	}
	AccountingOK bool
	Queues       []queueSummary
}

type recvSummary struct {
	Packets, Valid, Gaps, Late, Lost, BadIPCsum, BadUDPCsum, BadPayload, Other, XDPDropped uint64
	TTLMin, TTLMax                                                                         int
	Mpps, CPUSeconds                                                                       float64
	AccountingOK                                                                           bool
	Queues                                                                                 []queueSummary
}

func main() {
	var c config
	app := cli.New("xdpdemo", usage)
	fs := app.FS
	fs.StringVar(&c.bin, "bin", "", "directory with xdpgen, xdpfwd and xdprecv (default: this program's)")
	fs.StringVar(&c.rate, "rate", "50k", "generator rate (packets/s, bit rate, or max)")
	fs.DurationVar(&c.duration, "duration", 4*time.Second, "how long the generator sends")
	fs.StringVar(&c.size, "size", "64", "generator frame size, list or imix")
	fs.IntVar(&c.flows, "flows", 4, "generator flows")
	fs.BoolVar(&c.ipv6, "ipv6", false, "send IPv6")
	fs.StringVar(&c.policy, "policy", "auto", "generator copy policy: auto, offload, software, nt, plain")
	fs.IntVar(&c.queues, "queues", 1, "queues per veth, each served by its own pinned thread in every program")
	fs.BoolVar(&c.bench, "bench", false, "benchmark: 64-byte frames flat out, drops at every stage")
	fs.BoolVar(&c.soak, "soak", false, "soak: run for -duration with link flaps; check memory and fds do not grow")
	fs.DurationVar(&c.flap, "flap", 5*time.Second, "with -soak: flap the forwarder's links this often")
	fs.BoolVar(&c.quiet, "quiet", false, "do not show the programs' status lines")
	app.Parse(os.Args[1:])
	maxDur := 10 * time.Minute
	if c.soak {
		maxDur = 24 * time.Hour
	}
	if c.duration <= 0 || c.duration > maxDur {
		app.Fail("-duration %v: want 0 < D <= %v", c.duration, maxDur)
	}
	if c.soak && (c.flap < 100*time.Millisecond || c.bench) {
		app.Fail("-soak: -flap must be at least 100ms, and -bench does not go with it")
	}
	if c.queues < 1 || c.queues > 64 {
		app.Fail("-queues %d: want 1..64", c.queues)
	}
	if c.bench {
		c.rate, c.size = "max", "64"
	}
	if c.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			app.Fatal(err)
		}
		c.bin = filepath.Dir(exe)
	}
	for _, b := range []string{"xdpgen", "xdpfwd", "xdprecv"} {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			app.Fail("-bin %s: no %s there (build the apps first: cd apps && go build -o DIR/ ./...)", c.bin, b)
		}
	}
	if os.Geteuid() != 0 {
		app.Fatal(errors.New("must run as root (network namespaces, XDP, AF_XDP)"))
	}
	ctx, cancel := cli.SignalContext()
	defer cancel()
	if err := run(ctx, &c); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "xdpdemo: interrupted; everything removed")
			os.Exit(130)
		}
		app.Fatal(err)
	}
}

func run(ctx context.Context, c *config) (err error) {
	vethns.Sweep() // namespaces of earlier runs that were killed
	fmt.Println("xdpdemo: building gen-ns -- fwd-ns -- recv-ns")
	t, err := topo.Create(&topo.Config{Queues: c.queues})
	if err != nil {
		return err
	}
	var procs []*topo.Proc
	defer func() {
		for _, p := range procs {
			_ = p.Stop(3 * time.Second)
		}
		if cerr := t.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		} else {
			fmt.Println("xdpdemo: namespaces and veths removed")
		}
	}()
	dst := t.Out.B.IPv4.Addr()
	if c.ipv6 {
		dst = t.Out.B.IPv6.Addr()
	}
	fmt.Printf("xdpdemo: %s [%s %s] -- [%s %s] %s [%s %s] -- [%s %s] %s\n",
		t.Gen.Name, t.In.A.Name, t.In.A.IPv4.Addr(), t.In.B.Name, t.In.B.IPv4.Addr(), t.Fwd.Name,
		t.Out.A.Name, t.Out.A.IPv4.Addr(), t.Out.B.Name, t.Out.B.IPv4.Addr(), t.Recv.Name)
	var echo io.Writer = os.Stdout
	if c.quiet {
		echo = nil
	}
	start := func(ns *vethns.NS, name string, args ...string) (*topo.Proc, error) {
		p, err := topo.Start(ns, filepath.Join(c.bin, name), echo, args...)
		if err != nil {
			return nil, err
		}
		procs = append([]*topo.Proc{p}, procs...)
		return p, p.WaitReady(ctx, 10*time.Second)
	}
	var qargs []string
	if c.queues > 1 {
		qargs = []string{"-queues", fmt.Sprint(c.queues)}
	}
	recv, err := start(t.Recv, "xdprecv", append([]string{"-i", t.Out.B.Name}, qargs...)...)
	if err != nil {
		return err
	}
	fwd, err := start(t.Fwd, "xdpfwd", append([]string{"-i", t.In.B.Name, "-o", t.Out.A.Name}, qargs...)...)
	if err != nil {
		return err
	}
	before, err := linkStats(t)
	if err != nil {
		return err
	}
	gen, err := start(t.Gen, "xdpgen", append([]string{"-i", t.In.A.Name, "-dst", dst.String(), "-rate", c.rate,
		"-duration", c.duration.String(), "-size", c.size, "-flows", fmt.Sprint(max(c.flows, c.queues)), "-policy", c.policy}, qargs...)...)
	if err != nil {
		return err
	}
	var sk *soaker
	if c.soak {
		sk = startSoak(ctx, t, fwd, c.flap)
	}
	select {
	case <-gen.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if sk != nil {
		sk.stop()
	}
	if err := gen.Err(); err != nil {
		return fmt.Errorf("xdpgen: %w: %s", err, strings.TrimSpace(gen.Stderr()))
	}
	// Let the last frames cross, then stop the forwarder and the receiver.
	time.Sleep(300 * time.Millisecond)
	after, err := linkStats(t)
	if err != nil {
		return err
	}
	errs := []error{fwd.Stop(5 * time.Second), recv.Stop(5 * time.Second)}
	for i, p := range []*topo.Proc{fwd, recv} {
		if errs[i] != nil {
			errs[i] = fmt.Errorf("%s: %w: %s", p.Name, errs[i], strings.TrimSpace(p.Stderr()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var gs genSummary
	var fsum fwdSummary
	var rs recvSummary
	for _, s := range []struct {
		p *topo.Proc
		v any
	}{{gen, &gs}, {fwd, &fsum}, {recv, &rs}} {
		if err := cli.ParseSummary(s.p.Output(), s.v); err != nil {
			return fmt.Errorf("%s: %w", s.p.Name, err)
		}
	}
	report(c, &gs, &fsum, &rs, before, after)
	if sk != nil {
		if err := sk.report(); err != nil {
			return err
		}
	}
	if !gs.AccountingOK || !fsum.AccountingOK || !rs.AccountingOK {
		return errors.New("a program did not get all its UMEM frames back")
	}
	return nil
}

type links [4]topo.LinkStats // In.A, In.B, Out.A, Out.B

func linkStats(t *topo.Topology) (links, error) {
	var l links
	var err error
	for i, end := range []*vethns.Link{t.In.A, t.In.B, t.Out.A, t.Out.B} {
		if l[i], err = topo.Stats(end); err != nil {
			return l, err
		}
	}
	return l, nil
}

func report(c *config, g *genSummary, f *fwdSummary, r *recvSummary, before, after links) {
	lost := int64(g.Sent) - int64(r.Valid)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Println()
	if c.bench {
		fmt.Println("xdpdemo -bench: 64-byte frames, flat out, through gen -> fwd (L3) -> recv")
	} else {
		fmt.Printf("xdpdemo: %s frames at %s pps for %v through gen -> fwd (L3) -> recv\n", c.size, c.rate, c.duration)
	}
	fmt.Fprintln(w, "\tsent\tforwarded\treceived\tlost\tgen Mpps\tfwd Mpps\trecv Mpps\t")
	fmt.Fprintf(w, "\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t\n", g.Sent, f.Forwarded, r.Valid, lost, g.Mpps, f.Mpps, r.Mpps)
	w.Flush()
	fmt.Printf("copy policy: %s -- %s\n", g.Policy, g.PolicyReason)
	fmt.Printf("forwarder: attach %s, TTL %d -> %d at the receiver, CPU %.2f s\n", f.AttachMode, 64, r.TTLMax, f.CPUSeconds)
	if (c.queues > 1 || c.bench) && len(g.Queues) == c.queues && len(f.Queues) == c.queues && len(r.Queues) == c.queues {
		fmt.Println("\nper queue (each program's queue i on its own thread; CPU: the thread's CPU time):")
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "queue\tsent\tforwarded\treceived\tgen CPU s\tfwd CPU s\trecv CPU s\tfwd ns/pkt\tfwd pinned to\t")
		for i := range c.queues {
			fq := f.Queues[i]
			pin := "not pinned"
			if fq.CPU >= 0 {
				pin = fmt.Sprintf("CPU %d", fq.CPU)
			}
			fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t\n", fq.Queue, g.Queues[i].Sent, fq.Forwarded,
				r.Queues[i].Valid, g.Queues[i].CPUSeconds, fq.CPUSeconds, r.Queues[i].CPUSeconds,
				fq.CPUSeconds*1e9/float64(max(fq.Forwarded, 1)), pin)
		}
		w.Flush()
	}
	d := func(i int) topo.LinkStats {
		a, b := after[i], before[i]
		return topo.LinkStats{RxPackets: a.RxPackets - b.RxPackets, TxPackets: a.TxPackets - b.TxPackets,
			RxDropped: a.RxDropped - b.RxDropped, TxDropped: a.TxDropped - b.TxDropped}
	}
	if c.bench || c.soak || lost != 0 {
		fmt.Println("\nstage by stage (packets; drops):")
		w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "xdpgen\tqueued %d, completed %d\tTX invalid %d, waits for room %d\n", g.Sent, g.Completed, g.TXInvalid, g.Waits)
		ia, ib := d(0), d(1)
		fmt.Fprintf(w, "veth in (gen end -> fwd end)\ttx %d -> rx %d\ttx dropped %d, rx dropped %d\n", ia.TxPackets, ib.RxPackets, ia.TxDropped, ib.RxDropped)
		var xdpDrop, ringFull, fillEmpty uint64
		for _, x := range f.XDP {
			xdpDrop += x.RXDropped
			ringFull += x.RXRingFull
			fillEmpty += x.RXFillEmpty
		}
		fmt.Fprintf(w, "xdpfwd RX\ttaken %d\tXDP rx_dropped %d, rx_ring_full %d, fill ring empty %d times\n", f.Received, xdpDrop, ringFull, fillEmpty)
		fmt.Fprintf(w, "xdpfwd TX\tforwarded %d\tTX ring full %d, TTL %d, no route %d, no neighbour %d, parse %d\n",
			f.Forwarded, f.TXRingFull, f.TTLExpired, f.NoRoute, f.NoNeighbour, f.ParseErrors)
		oa, ob := d(2), d(3)
		fmt.Fprintf(w, "veth out (fwd end -> recv end)\ttx %d -> rx %d\ttx dropped %d, rx dropped %d\n", oa.TxPackets, ob.RxPackets, oa.TxDropped, ob.RxDropped)
		fmt.Fprintf(w, "xdprecv\treceived %d, valid %d\tXDP drops %d, gaps %d, late %d, bad csum %d/%d, bad payload %d\n",
			r.Packets, r.Valid, r.XDPDropped, r.Gaps, r.Late, r.BadIPCsum, r.BadUDPCsum, r.BadPayload)
		w.Flush()
	}
}
