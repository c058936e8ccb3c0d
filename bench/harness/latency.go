package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// The latency part: one paced sender, the C reference's txonly with
// --rate, --busy, --stamp and --drain, writes the send time (CLOCK_TAI
// ns, where xdpgen -timestamp puts it) into every frame of a batch just
// before it submits the batch, polls the clock for each frame's time
// rather than sleeping and kicks until the kernel took the batch, so that
// frames leave on time, one per kick while it keeps up; each receiver in
// turn, on the rxdrop topology (one veth pair, the receiver pinned to the
// measured CPU), keeps a histogram of the one-way delay to the moment its own code
// sees the packet (CLOCK_TAI again) and prints p50, p99 and p99.9. The
// harness reads the receiver's CPU time around the sender's run, as for
// the rxdrop rows.

// Latency is the latency part's result.
type Latency struct {
	// Size is the frame length: xdpgen's smallest stamped UDP/IPv4 frame.
	Size  int       `json:"size"`
	Cases []LatCase `json:"cases"`
}

// LatCase is one offered rate, with or without NAPI deferral on the
// receiving veth (napiDefer, napiFlush: the rxdrop rows' setting).
type LatCase struct {
	Rate         int       `json:"rate_pps"`
	NAPIDeferral bool      `json:"napi_deferral,omitempty"`
	Recv         []LatRecv `json:"receivers"`
}

// LatRecv is one receiver's runs in a case.
type LatRecv struct {
	// Name is one of latReceivers' names.
	Name string   `json:"name"`
	Runs []LatRun `json:"runs"`
	// Med are the medians over Runs of each figure, Lo and Hi the
	// smallest and largest (the spread).
	Med LatFig `json:"median"`
	Lo  LatFig `json:"lo"`
	Hi  LatFig `json:"hi"`
}

// LatFig are the figures of one run, or a summary of them.
type LatFig struct {
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	// CPUPerM is the receiver's CPU-seconds per million packets.
	CPUPerM float64 `json:"cpu_s_per_mpkt"`
}

// LatRun is one run of one receiver.
type LatRun struct {
	// Samples are the stamped packets whose delay was recorded; Negative
	// those received "before" they were sent (left out: clocks not in
	// step); Frames the receiver's count of all packets.
	Samples  uint64 `json:"samples"`
	Negative uint64 `json:"negative"`
	Frames   uint64 `json:"frames"`
	// Sent is the frames the sender's kernel completed, OfferedMpps its
	// rate, SenderKicks its sendto calls (fewer than Sent: it fell
	// behind and sent frames in batches), all from the sender's JSON
	// line.
	Sent        uint64  `json:"sent"`
	OfferedMpps float64 `json:"offered_mpps"`
	SenderKicks uint64  `json:"sender_kicks"`
	P50Us       float64 `json:"p50_us"`
	P99Us       float64 `json:"p99_us"`
	P999Us      float64 `json:"p999_us"`
	MaxUs       float64 `json:"max_us"`
	// CPU is the receiver's on-CPU time from the sender's ready line to
	// 50 ms after its end; CPUPerM per million Frames.
	CPU     float64         `json:"cpu_s"`
	CPUPerM float64         `json:"cpu_s_per_mpkt"`
	Raw     json.RawMessage `json:"raw"`
}

func (r LatRun) fig() LatFig { return LatFig{r.P50Us, r.P99Us, r.P999Us, r.CPUPerM} }

// latReceivers are the receivers compared, in the order of the first run
// (later runs rotate it).
var latReceivers = []struct {
	name, desc string
	c          bool // xdpbench, else xdpkitbench
	args       []string
}{
	{"c-poll", "C, poll(2) when idle", true, nil},
	{"c-spin", "C, spinning", true, []string{"--spin"}},
	// The receivers read every packet's stamp, so xdpkit's set
	// rxpath.Config.Prefetch, as the package advises for a handler that
	// reads its packets: the C receiver reads a batch's stamps in one
	// tight loop, whose cache misses the CPU overlaps by itself. It lowers
	// the CPU per packet of long batches; the delays it cannot lower, as
	// xdpkit's handler reads the clock after the poller's reads ahead (the
	// C receiver before its reads).
	{"xdpkit", "xdpkit (rxpath.Poller, defaults, Prefetch)", false, []string{"--prefetch"}}, // see latDesc
	// The Poller sleeping in the Go runtime's poller also while packets
	// flow: what the default's sleep in ppoll saves.
	{"xdpkit-rt", "xdpkit (rxpath.Poller, RuntimeSleep, Prefetch)", false, []string{"--runtime-sleep", "--prefetch"}},
}

// latSize is the stamped frames' length: headers, the 16-byte header and
// the 8-byte stamp (xdpgen -timestamp's smallest).
const latSize = 66

// latRates are the fixed offered rates of the latency rows.
var latRates = []int{100_000, 300_000, 1_000_000}

// parseLatLine reads a receiver's JSON line (xdpbench or xdpkitbench
// --latency).
func parseLatLine(line []byte) (LatRun, error) {
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return LatRun{}, fmt.Errorf("receiver output is not one JSON line: %w", err)
	}
	if _, ok := m["lat_samples"]; !ok {
		return LatRun{}, errors.New("receiver output has no lat_samples: not a --latency run")
	}
	us := func(k string) float64 { return num(m, k) / 1e3 }
	return LatRun{
		Samples: uint64(num(m, "lat_samples")), Negative: uint64(num(m, "lat_negative")), Frames: uint64(num(m, "frames")),
		P50Us: us("lat_p50_ns"), P99Us: us("lat_p99_ns"), P999Us: us("lat_p999_ns"), MaxUs: us("lat_max_ns"),
		Raw: json.RawMessage(line),
	}, nil
}

// summarize sets r's medians and spread from its runs.
func (r *LatRecv) summarize() {
	cols := []func(*LatFig) *float64{
		func(f *LatFig) *float64 { return &f.P50 }, func(f *LatFig) *float64 { return &f.P99 },
		func(f *LatFig) *float64 { return &f.P999 }, func(f *LatFig) *float64 { return &f.CPUPerM },
	}
	r.Med, r.Lo, r.Hi = LatFig{}, LatFig{}, LatFig{}
	for _, col := range cols {
		var v []float64
		for _, run := range r.Runs {
			f := run.fig()
			v = append(v, *col(&f))
		}
		if len(v) == 0 {
			continue
		}
		*col(&r.Med) = median(v)
		lo, hi := v[0], v[0]
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
		*col(&r.Lo), *col(&r.Hi) = lo, hi
	}
}

func (c *LatCase) recv(name string) *LatRecv {
	for i := range c.Recv {
		if c.Recv[i].Name == name {
			return &c.Recv[i]
		}
	}
	return nil
}

// latencyTargets are the latency goals: at every fixed rate without NAPI
// deferral, xdpkit's p50, p99 and CPU per packet against the C receiver
// sleeping in poll(2), each lower-is-better, judged like the CPU rows.
func latencyTargets(l *Latency) []Target {
	if l == nil {
		return nil
	}
	var out []Target
	for _, c := range l.Cases {
		cp, gp := c.recv("c-poll"), c.recv("xdpkit")
		if c.NAPIDeferral || cp == nil || gp == nil || len(cp.Runs) == 0 || len(gp.Runs) == 0 {
			continue
		}
		// xdpkit lost at most 1% of the sent frames more than C did.
		delivered := gp.loss() <= cp.loss()+0.01
		for _, ax := range []struct {
			what string
			f    func(LatFig) float64
		}{
			{"p50", func(f LatFig) float64 { return f.P50 }},
			{"p99", func(f LatFig) float64 { return f.P99 }},
			{"CPU", func(f LatFig) float64 { return f.CPUPerM }},
		} {
			cm := ax.f(cp.Med)
			if cm <= 0 {
				continue
			}
			t := Target{Name: fmt.Sprintf("latency %d B at %s, xdpkit against C poll(2)", l.Size, rateName(c.Rate)), What: ax.what, Ratio: ax.f(gp.Med) / cm}
			t.RunLo, t.RunHi = latPairRange(cp.Runs, gp.Runs, func(r LatRun) float64 { return ax.f(r.fig()) })
			t.Met = t.Ratio <= 1 && delivered
			t.judge(delivered)
			out = append(out, t)
		}
	}
	return out
}

// loss is the median over r's runs of the share of sent frames the
// receiver did not count.
func (r *LatRecv) loss() float64 {
	v := make([]float64, 0, len(r.Runs))
	for _, run := range r.Runs {
		if run.Sent > 0 {
			v = append(v, 1-float64(run.Frames)/float64(run.Sent))
		}
	}
	return median(v)
}

func (r *LatRecv) medFrames() float64 {
	v := make([]float64, len(r.Runs))
	for i, run := range r.Runs {
		v[i] = float64(run.Frames)
	}
	return median(v)
}

// latPairRange is the range of xdpkit/C over the runs paired by index.
func latPairRange(c, g []LatRun, f func(LatRun) float64) (lo, hi float64) {
	first := true
	for i := 0; i < min(len(c), len(g)); i++ {
		d := f(c[i])
		if d <= 0 {
			continue
		}
		r := f(g[i]) / d
		if first || r < lo {
			lo = r
		}
		if first || r > hi {
			hi = r
		}
		first = false
	}
	return lo, hi
}

// latOrder is the receivers' order in run r: rotated by one each run, so
// that each runs first, second and last alike.
func latOrder(r, n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = (i + r) % n
	}
	return o
}

// writeLatency writes the latency table.
func writeLatency(b *strings.Builder, l *Latency, runs int) {
	if l == nil || len(l.Cases) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### One-way latency, %d B, paced sender (xdpbench --rate --busy --stamp --drain), %d runs per receiver, alternated\n\n", l.Size, runs)
	b.WriteString("Delay from the sender's CLOCK_TAI stamp to the moment the receiver's code sees the packet (CLOCK_TAI, read once per batch), " +
		"median over the runs with the range over the runs (the spread) in brackets; CPU is the receiver's on-CPU time per million packets " +
		"over the sender's run; loss is the share of the frames the sender completed that the receiver did not count. The goal table judges xdpkit's p50, p99 and CPU against the C receiver sleeping in poll(2) at every rate " +
		"without NAPI deferral, lower is better, as it judges the CPU rows (met only when xdpkit lost at most 1% of the sent frames more than C).\n\n")
	b.WriteString("| rate | NAPI deferral | receiver | p50 µs | p99 µs | p99.9 µs | CPU-s per Mpkt | received (median) | loss (median) |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range l.Cases {
		napi := "off"
		if c.NAPIDeferral {
			napi = fmt.Sprintf("%d, %v", napiDefer, napiFlush)
		}
		for _, r := range c.Recv {
			desc := r.Name
			for _, lr := range latReceivers {
				if lr.name == r.Name {
					desc = latDesc(lr.desc, lr.c, lr.args)
				}
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %.0f | %.2f%% |\n", rateName(c.Rate), napi, desc,
				latSpread(r.Med.P50, r.Lo.P50, r.Hi.P50, 1), latSpread(r.Med.P99, r.Lo.P99, r.Hi.P99, 0),
				latSpread(r.Med.P999, r.Lo.P999, r.Hi.P999, 0), latSpread(r.Med.CPUPerM, r.Lo.CPUPerM, r.Hi.CPUPerM, 2), r.medFrames(), 100*r.loss())
		}
	}
}

// latDesc completes xdpkit's receiver's description with whether it
// sleeps with rxpath.Config.RuntimeSleep: the last --runtime-sleep flag
// of the harness's xdpkitbench arguments, -goargs and the receiver's own
// arguments (extra, in that order, as latOnce passes them) decides.
func latDesc(desc string, isC bool, extra []string) string {
	if isC {
		return desc
	}
	rt := false
	for _, a := range slices.Concat(xdpkitArgs, goArgs, extra) {
		if v, ok := strings.CutPrefix(a, "--runtime-sleep"); ok && (v == "" || strings.HasPrefix(v, "=")) {
			rt = v == "" || v == "=true" || v == "=1"
		}
	}
	switch {
	case rt && !strings.Contains(desc, "RuntimeSleep"):
		return strings.TrimSuffix(desc, ")") + " and RuntimeSleep)"
	case !rt && strings.Contains(desc, "RuntimeSleep"):
		return strings.TrimSuffix(desc, ")") + ", turned off by -goargs)"
	}
	return desc
}

func latSpread(med, lo, hi float64, d int) string {
	return fmt.Sprintf("%.*f [%.*f-%.*f]", d, med, d, lo, d, hi)
}

// name is the case's name for -match, e.g. "latency 300 kpps napi=off".
func (c LatCase) name() string {
	napi := "off"
	if c.NAPIDeferral {
		napi = "on"
	}
	return fmt.Sprintf("latency %s napi=%s", rateName(c.Rate), napi)
}

// latCases are the latency part's cases: every rate without NAPI
// deferral, then with it.
func latCases() []LatCase {
	var cs []LatCase
	for _, napi := range []bool{false, true} {
		for _, r := range latRates {
			cs = append(cs, LatCase{Rate: r, NAPIDeferral: napi})
		}
	}
	return cs
}

// runLatency measures the latency part. Quick mode skips it: it needs
// several runs of several seconds to say anything.
func runLatency(ctx context.Context, c *config, dir string) (_ *Latency, err error) {
	if c.quick {
		logf("latency: skipped in quick mode")
		return nil, nil
	}
	vethns.Sweep()
	cbin, gobin, err := build(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	var cl cleanups
	defer func() {
		if cerr := cl.run(); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
	}()
	a, err := newNS(&cl)
	if err != nil {
		return nil, err
	}
	bns, err := newNS(&cl)
	if err != nil {
		return nil, err
	}
	pair, err := newPair(&cl, a, bns)
	if err != nil {
		return nil, err
	}
	gen, meas := -1, -1
	if c.pin {
		gen, meas = c.genCPU, c.measCPU
	}
	l := &Latency{Size: latSize}
	for _, lc := range latCases() {
		if c.match != nil && !c.match.MatchString(lc.name()) {
			continue
		}
		for _, rc := range latReceivers {
			lc.Recv = append(lc.Recv, LatRecv{Name: rc.name})
		}
		for r := 0; r < c.runs; r++ {
			for _, i := range latOrder(r, len(latReceivers)) {
				if err := ctx.Err(); err != nil {
					return l, err
				}
				rc := latReceivers[i]
				bin := gobin
				if rc.c {
					bin = cbin
				}
				run, err := latOnce(ctx, pair, lc, bin, rc.c, rc.args, cbin, c.seconds, gen, meas)
				if err != nil {
					return l, fmt.Errorf("latency at %s (NAPI deferral %v), %s run %d: %w", rateName(lc.Rate), lc.NAPIDeferral, rc.name, r, err)
				}
				lc.Recv[i].Runs = append(lc.Recv[i].Runs, run)
				logf("  latency %-9s napi=%-5v %-6s run %d: p50 %.1f p99 %.1f p99.9 %.1f us, %.3f CPU-s/Mpkt, %d of %d packets stamped (%d negative)",
					rateName(lc.Rate), lc.NAPIDeferral, rc.name, r, run.P50Us, run.P99Us, run.P999Us, run.CPUPerM, run.Samples, run.Frames, run.Negative)
			}
		}
		for i := range lc.Recv {
			lc.Recv[i].summarize()
		}
		l.Cases = append(l.Cases, lc)
	}
	return l, nil
}

// latOnce runs one receiver against the paced sender (cbin) once.
func latOnce(ctx context.Context, p *vethns.Pair, lc LatCase, bin string, isC bool, extra []string, cbin string, secs, gen, meas int) (LatRun, error) {
	var run LatRun
	args := []string{"-m", "rxdrop", "-i", p.B.Name, "-q", "0", "-d", strconv.Itoa(secs + 10), "--latency"}
	if !isC {
		args = append(args, xdpkitArgs...)
		args = append(args, goArgs...)
	}
	args = append(args, extra...)
	rx, err := start(ctx, p.B.NS, meas, bin, args...)
	if err != nil {
		return run, err
	}
	if err := rx.waitReady(); err != nil {
		return run, err
	}
	if lc.NAPIDeferral {
		restore, err := deferNAPI(p.B.NS, p.B.Name)
		if err != nil {
			rx.kill()
			return run, err
		}
		defer restore()
	}
	gargs := append(genArgs(p.A, p.B, p.B.IPv4.Addr(), latSize, secs), "--rate", strconv.Itoa(lc.Rate), "--busy", "--stamp", "--drain")
	g, err := start(ctx, p.A.NS, gen, cbin, gargs...)
	if err != nil {
		rx.kill()
		return run, err
	}
	if err := g.waitReady(); err != nil {
		rx.kill()
		return run, fmt.Errorf("sender: %w", err)
	}
	p0, err := procCPU(rx.cmd.Process.Pid)
	if err != nil {
		g.kill()
		rx.kill()
		return run, err
	}
	gm, _, err := g.result()
	if err != nil {
		rx.kill()
		return run, fmt.Errorf("sender: %w", err)
	}
	time.Sleep(50 * time.Millisecond) // frames in flight
	p1, err := procCPU(rx.cmd.Process.Pid)
	if err != nil {
		rx.kill()
		return run, err
	}
	rx.interrupt()
	<-rx.done
	if rx.err != nil {
		return run, fmt.Errorf("%s: %v\n%s", rx.desc, rx.err, rx.stderrText())
	}
	if run, err = parseLatLine([]byte(strings.TrimSpace(rx.stdout.String()))); err != nil {
		return run, err
	}
	run.Sent, run.OfferedMpps, run.SenderKicks = uint64(num(gm, "frames")), num(gm, "mpps"), uint64(num(gm, "kicks"))
	if run.Sent == 0 {
		return run, fmt.Errorf("the sender completed no frames: %v", gm)
	}
	run.CPU = p1.sub(p0).Total()
	if run.Frames > 0 {
		run.CPUPerM = run.CPU * 1e6 / float64(run.Frames)
	}
	return run, nil
}
