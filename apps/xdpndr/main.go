package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

const usage = `xdpndr: the highest rate whose loss stays within a bound (NDR, PDR), by trials of xdpgen against xdprecv.

Usage: xdpndr -gen-i IFACE -dst ADDR -recv-i IFACE [-gen-ns NS] [-recv-ns NS] [-bin DIR]
              [-loss PCT] [-trial D] [-resolution PCT%|PPS] [-min PPS] [-max PPS] [-start PPS] [-max-trials N] [-retries N]
              [-size N] [-flows N] [-gen-args ARGS] [-recv-args ARGS] [-drain D]
       xdpndr -topo [-fwd-args ARGS] [search flags]   # gen-ns -> xdpfwd -> recv-ns, built and removed here`

type config struct {
	bin               string
	genNS, genIf, dst string
	recvNS, recvIf    string
	genArgs, recvArgs string
	fwdArgs           string
	topo, ipv6        bool
	lossPct           float64
	trial, drain      time.Duration
	resS, minS, maxS  string
	startS            string
	maxTrials         int
	retries           int
	size              string
	flows             int
	search            Config
}

func main() {
	var c config
	app := cli.New("xdpndr", usage)
	fs := app.FS
	fs.StringVar(&c.bin, "bin", "", "directory with xdpgen, xdprecv (and xdpfwd for -topo) (default: this program's)")
	fs.StringVar(&c.genNS, "gen-ns", "", "network namespace of the generator (ip netns name; default: this one)")
	fs.StringVar(&c.genIf, "gen-i", "", "the generator's interface")
	fs.StringVar(&c.dst, "dst", "", "destination address of the generator's packets (the receiver's)")
	fs.StringVar(&c.recvNS, "recv-ns", "", "network namespace of the receiver (default: this one)")
	fs.StringVar(&c.recvIf, "recv-i", "", "the receiver's interface")
	fs.StringVar(&c.genArgs, "gen-args", "", "more xdpgen flags, space-separated (e.g. \"-policy software -queues 2\")")
	fs.StringVar(&c.recvArgs, "recv-args", "", "more xdprecv flags, space-separated")
	fs.BoolVar(&c.topo, "topo", false, "build the demo's topology (gen-ns -> xdpfwd -> recv-ns), search through xdpfwd, remove it")
	fs.StringVar(&c.fwdArgs, "fwd-args", "", "with -topo: more xdpfwd flags (e.g. \"-max-pps 50k\")")
	fs.BoolVar(&c.ipv6, "ipv6", false, "with -topo: send IPv6")
	fs.Float64Var(&c.lossPct, "loss", 0, "loss bound in percent: 0 for the NDR, e.g. 0.5 for a PDR")
	fs.DurationVar(&c.trial, "trial", time.Second, "each trial's sending time")
	fs.DurationVar(&c.drain, "drain", time.Second, "how long the receiver waits for the last packets of a lossy trial")
	fs.StringVar(&c.resS, "resolution", "2%", "stop when the bounds are this close: a percentage of the upper bound (2%) or packets/s (1000)")
	fs.StringVar(&c.minS, "min", "1k", "lowest rate searched, packets/s")
	fs.StringVar(&c.maxS, "max", "1M", "highest rate searched, packets/s")
	fs.StringVar(&c.startS, "start", "", "first trial's rate (default: -max)")
	fs.IntVar(&c.maxTrials, "max-trials", 20, "at most this many trials")
	fs.IntVar(&c.retries, "retries", 0, "run a failed trial again up to this many times; the rate passes if one attempt does (for a host whose other work makes the path drop now and then)")
	fs.StringVar(&c.size, "size", "", "xdpgen -size (default: 64 bytes, 78 over IPv6)")
	fs.IntVar(&c.flows, "flows", 1, "xdpgen -flows")
	app.Parse(os.Args[1:])
	if err := c.check(); err != nil {
		app.Fail("%v", err)
	}
	ctx, cancel := cli.SignalContext()
	defer cancel()
	if err := run(ctx, &c); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "xdpndr: interrupted")
			os.Exit(130)
		}
		app.Fatal(err)
	}
}

func (c *config) check() error {
	var err error
	s := &c.search
	if s.Min, err = cli.ParseRate(c.minS); err != nil {
		return fmt.Errorf("-min %w", err)
	}
	if s.Max, err = cli.ParseRate(c.maxS); err != nil {
		return fmt.Errorf("-max %w", err)
	}
	if c.startS != "" {
		if s.Start, err = cli.ParseRate(c.startS); err != nil {
			return fmt.Errorf("-start %w", err)
		}
	}
	if s.Resolution, s.Relative, err = parseResolution(c.resS); err != nil {
		return err
	}
	s.LossPct, s.MaxTrials = c.lossPct, c.maxTrials
	if err := s.Check(); err != nil {
		return err
	}
	if c.trial < 100*time.Millisecond || c.trial > 10*time.Minute {
		return fmt.Errorf("-trial %v: want 100ms..10m", c.trial)
	}
	if c.retries < 0 || c.retries > 10 {
		return fmt.Errorf("-retries %d: want 0..10", c.retries)
	}
	if c.drain < 0 || c.drain > time.Minute {
		return fmt.Errorf("-drain %v: want 0..1m", c.drain)
	}
	if c.topo {
		if c.genIf != "" || c.recvIf != "" || c.genNS != "" || c.recvNS != "" || c.dst != "" {
			return errors.New("-topo builds its own namespaces and interfaces: no -gen-i, -recv-i, -gen-ns, -recv-ns or -dst with it")
		}
	} else if c.genIf == "" || c.recvIf == "" || c.dst == "" {
		return errors.New("-gen-i, -recv-i and -dst are required (or -topo)")
	} else if c.fwdArgs != "" || c.ipv6 {
		return errors.New("-fwd-args and -ipv6 go with -topo")
	}
	if c.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.bin = filepath.Dir(exe)
	}
	bins := []string{"xdpgen", "xdprecv"}
	if c.topo {
		bins = append(bins, "xdpfwd")
	}
	for _, b := range bins {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			return fmt.Errorf("-bin %s: no %s there (build the apps: cd apps && go build -o DIR/ ./...)", c.bin, b)
		}
	}
	return nil
}

// out writes v as one JSON line on standard output.
func out(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"Type":"error","Error":%q}`, err.Error()))
	}
	os.Stdout.Write(append(b, '\n'))
}

func run(ctx context.Context, c *config) (err error) {
	r := &trialRunner{bin: c.bin, gen: side{c.genNS, c.genIf}, recv: side{c.recvNS, c.recvIf}, dst: c.dst,
		recvArgs: strings.Fields(c.recvArgs), trial: c.trial, drain: c.drain, loss: c.lossPct, ctx: ctx}
	if c.topo {
		if os.Geteuid() != 0 {
			return errors.New("-topo must run as root (network namespaces, XDP, AF_XDP)")
		}
		vethns.Sweep() // namespaces of earlier runs that were killed
		t, err := topo.Create(nil)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := t.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			} else {
				fmt.Fprintln(os.Stderr, "xdpndr: namespaces and veths removed")
			}
		}()
		dst := t.Out.B.IPv4.Addr()
		if c.ipv6 {
			dst = t.Out.B.IPv6.Addr()
		}
		r.gen, r.recv, r.dst = side{t.Gen.Name, t.In.A.Name}, side{t.Recv.Name, t.Out.B.Name}, dst.String()
		fwd, err := start(t.Fwd.Name, filepath.Join(c.bin, "xdpfwd"), func(l string) bool { return strings.Contains(l, ": ready:") },
			append([]string{"-i", t.In.B.Name, "-o", t.Out.A.Name, "-quiet"}, strings.Fields(c.fwdArgs)...)...)
		if err != nil {
			return err
		}
		defer func() {
			if serr := fwd.stop(10 * time.Second); serr != nil {
				err = errors.Join(err, fwd.failure(serr))
			}
			var fs struct {
				Received, Forwarded, Policed, TXRingFull uint64
				XDP                                      []struct{ RXDropped, RXRingFull uint64 }
			}
			if fwd.lastJSON("summary ", false, &fs) == nil {
				var ringFull uint64
				for _, x := range fs.XDP {
					ringFull += x.RXDropped + x.RXRingFull
				}
				fmt.Fprintf(os.Stderr, "xdpndr: xdpfwd over all trials: received %d, forwarded %d, policed %d, TX ring full %d, XDP drops %d\n",
					fs.Received, fs.Forwarded, fs.Policed, fs.TXRingFull, ringFull)
			}
		}()
		if err := fwd.waitReady(ctx, 30*time.Second); err != nil {
			return err
		}
		fwd.mu.Lock()
		for _, l := range fwd.lines {
			if strings.Contains(l, "-max-pps") {
				fmt.Fprintln(os.Stderr, l)
			}
		}
		fwd.mu.Unlock()
		fmt.Fprintf(os.Stderr, "xdpndr: %s [%s] -> xdpfwd in %s -> [%s] %s, to %s\n",
			t.Gen.Name, t.In.A.Name, t.Fwd.Name, t.Out.B.Name, t.Recv.Name, dst)
	}
	size := c.size
	if size == "" {
		size = "64"
		if a, err := netip.ParseAddr(r.dst); err == nil && a.Unmap().Is6() {
			size = "78" // the smallest frame with IPv6 and xdpgen's payload header
		}
	}
	r.genArgs = append([]string{"-size", size, "-flows", fmt.Sprint(c.flows)}, strings.Fields(c.genArgs)...)
	t0 := time.Now()
	res, err := Search(c.search, withRetries(r.run, c.retries), func(t Trial) { out(t) })
	res.Seconds = time.Since(t0).Seconds()
	out(res)
	what := "NDR"
	if c.lossPct > 0 {
		what = fmt.Sprintf("PDR (loss <= %g%%)", c.lossPct)
	}
	switch {
	case err != nil:
	case res.RatePPS == 0:
		fmt.Fprintf(os.Stderr, "xdpndr: no rate passed: %s\n", res.Reason)
	default:
		fmt.Fprintf(os.Stderr, "xdpndr: %s %.0f pps after %d trials (%s)\n", what, res.RatePPS, res.Trials, res.Reason)
	}
	return err
}
