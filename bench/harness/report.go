package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// report renders the results as Markdown tables (printed, and written to
// summary.md for the README).
func report(r *Results) string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Measured %s at commit %s on %s (%d CPUs), Linux %s, %s, gcc %s; load average at start %s.\n",
		m.Date, m.Commit, m.CPU, m.CPUs, m.Kernel, m.Go, m.GCC, m.Load)
	mode := fmt.Sprintf("%d runs of %d s per implementation, alternated, after a warm-up run", r.Runs, r.Seconds)
	if r.Quick {
		mode = "quick mode: one run of 1 s each, no warm-up"
	}
	pin := "generator/peer on CPU 0, measured program on CPU 1"
	if !r.Pinned {
		pin = "not pinned"
	}
	fmt.Fprintf(&b, "%s; %s. Total time %.0f s.\n", mode, pin, r.Elapsed)

	writeTargets(&b, allTargets(r))
	if len(r.XDP) > 0 {
		writeXDP(&b, r)
	}
	writeSample(&b, r.XDP)
	writeLatency(&b, r.Latency, r.Runs)
	if len(r.Micro) > 0 {
		b.WriteString("\n### Micro-benchmarks, hot source, best time (GB/s = bytes/ns)\n\n")
		b.WriteString("| benchmark | size | Go (xdpkit) | C |\n|---|---:|---|---|\n")
		type key struct {
			bench, where string
			size         int
		}
		var keys []key
		seen := map[key]bool{}
		g := map[key][]string{}
		cc := map[key][]string{}
		for _, x := range r.Micro {
			k := key{x.Bench, x.Where, x.Size}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
			s := fmt.Sprintf("%s %.0f ns (%.1f GB/s)", x.Impl, x.Ns, x.GBps)
			if x.Lang == "go" {
				g[k] = append(g[k], s)
			} else {
				cc[k] = append(cc[k], s)
			}
		}
		for _, k := range keys {
			name := k.bench
			if k.where != "" {
				name += " (" + k.where + " destination)"
			}
			fmt.Fprintf(&b, "| %s | %d B | %s | %s |\n", name, k.size, strings.Join(g[k], "; "), strings.Join(cc[k], "; "))
		}
	}
	writePaired(&b, r.Paired)
	if r.Grid != nil {
		g := r.Grid
		passed := 0
		for _, c := range g.Cells {
			if c.Pass {
				passed++
			}
		}
		verdict := fmt.Sprintf("PASS (%d of %d cells)", passed, len(g.Cells))
		if !g.Pass {
			verdict = fmt.Sprintf("FAIL (%d of %d cells pass)", passed, len(g.Cells))
		}
		widened := ""
		if hasBand(g) {
			widened = ", widened by the run's noise"
		}
		fmt.Fprintf(&b, "\n### Copy-policy grid: auto within %.0f%% of every fixed method%s: %s\n\n", g.Tolerance*100, widened, verdict)
		if g.Starts > 1 {
			fmt.Fprintf(&b, "The grid takes ChooseCopy's start-up measurement %d times (txpath.Remeasure), as %d processes would, "+
				"and measures every cell after each, %d rounds per cell; a cell passes when auto passes in most starts "+
				"(*within spread*: not in every start), each start judged against its own band. A cell's figures and band are those "+
				"of the start with the median auto/worst among the starts that agree with its verdict; auto/worst [min-max] spans "+
				"the starts, and *choice* lists auto's choice in each where they differ (results.json has each start's verdict). ",
				g.Starts, g.Starts, g.Rounds)
		}
		fmt.Fprintf(&b, "GB/s, median of %d rounds (best of the rounds in parentheses). ", g.Rounds)
		b.WriteString("auto is txpath.ChooseCopy's choice. Its verdict uses one statistic for every method: for each fixed method, " +
			"the median over the rounds of auto's GB/s over the method's in the same round; auto/worst is the smallest of these, " +
			"against the method in bold. The 3% gate is not tuned: a FAIL is reported as measured. ")
		if hasBand(g) {
			b.WriteString("The gate is widened by the noise of the run: in every cell auto's choice also runs twice as a fixed method " +
				"(the twin pair), and the noise is how far the same statistic puts one copy from the other, plus twice its standard error; " +
				"*band* is the largest noise of the layout and size, and a cell fails only when auto/worst is below 1 - 3% - band " +
				"(*within noise*: behind by more than 3%, but not beyond the band). ")
		}
		b.WriteString("Layouts: ")
		for i, l := range g.Layouts {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "*%s*: %d B frames, payload %d B into its frame, hot region %d KiB, cold ring %d MiB", l.Name, l.Frame,
				l.Off, l.HotBytes>>10, l.ColdBytes>>20)
		}
		b.WriteString(" (*seen* is the layout ChooseCopy measures at start-up; *unseen* it never saw). " +
			"copy+sum(dst) (copy, then sum the destination) is a candidate outside ChooseCopy's set. ")
		fmt.Fprintf(&b, "One txpath.ChooseCopy call costs %.1f ns; the grid asks it once per batch of 64 copies.\n\n", g.ChooseNs)
		fmt.Fprintf(&b, "nt calibration: %s\n\n", g.Calib)
		band := hasBand(g)
		if band {
			b.WriteString("| layout | size | dest | checksum | nt / nt+sum | copy / copy+sum | fused | copy+sum(dst) | auto (choice) | auto/worst | band | |\n")
			b.WriteString("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		} else {
			b.WriteString("| layout | size | dest | checksum | nt / nt+sum | copy / copy+sum | fused | copy+sum(dst) | auto (choice) | auto/worst | |\n")
			b.WriteString("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|\n")
		}
		for _, c := range g.Cells {
			ntName, cpName := "nt", "copy"
			extra := "-"
			if !c.Offload {
				ntName, cpName = "nt+sum", "copy+sum"
				extra = fig(c, "copy+sum(dst)")
			}
			if band {
				fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %.3f | %s |\n", c.Layout, c.Size, temp(c.Cold), offl(c.Offload),
					fig(c, ntName), fig(c, cpName), fig(c, "fused"), extra, fig(c, "auto"), choices(c), ratioSpan(c), c.Band, cellVerdict(c, g.Tolerance))
				continue
			}
			v := "PASS"
			if !c.Pass {
				v = "FAIL"
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s (%s) | %.3f | %s |\n", c.Layout, c.Size, temp(c.Cold), offl(c.Offload),
				fig(c, ntName), fig(c, cpName), fig(c, "fused"), extra, fig(c, "auto"), c.Auto, c.Ratio, v)
		}
	}
	if r.Deliver != nil {
		writeDeliver(&b, r.Deliver)
	}
	if r.Wake != nil {
		writeWake(&b, r.Wake)
	}
	if r.Gen != nil {
		writeGen(&b, r.Gen)
	}
	writeHistory(&b, r.History)
	return b.String()
}

// choices is auto's choice in a cell, in each start (once where every start
// chose the same).
func choices(c GridCell) string {
	var cs []string
	for _, s := range c.Starts {
		cs = append(cs, s.Auto)
	}
	if len(cs) == 0 || !slices.ContainsFunc(cs, func(a string) bool { return a != cs[0] }) {
		return c.Auto
	}
	return strings.Join(cs, ", ")
}

// ratioSpan is a cell's auto/worst, with its range over the starts.
func ratioSpan(c GridCell) string {
	if len(c.Starts) < 2 {
		return fmt.Sprintf("%.3f", c.Ratio)
	}
	lo, hi := c.Starts[0].Ratio, c.Starts[0].Ratio
	for _, s := range c.Starts {
		lo, hi = min(lo, s.Ratio), max(hi, s.Ratio)
	}
	return fmt.Sprintf("%.3f [%.3f-%.3f]", c.Ratio, lo, hi)
}

// hasBand: the grid was judged with a noise band (results written before
// the twin pair was measured have none, and render as they were).
func hasBand(g *Grid) bool {
	for _, c := range g.Cells {
		if c.Twin != "" {
			return true
		}
	}
	return false
}

func fig(c GridCell, name string) string {
	f := c.Methods[name]
	s := fmt.Sprintf("%.1f (%.1f)", f.Median, f.Best)
	if name == c.Best {
		s = "**" + s + "**"
	}
	return s
}

// writeXDP writes the AF_XDP tables: the maximum rate, then the fixed
// offered rates.
func writeXDP(b *strings.Builder, r *Results) {
	b.WriteString("\n### AF_XDP on veth (copy mode)\n\n")
	b.WriteString("Mpps is counted outside the measured program: TX-only by the harness's XDP counter on the peer, " +
		"forwarding by the same counter on the link back into the generator's namespace, L3 forwarding (l3fwd: in on one port " +
		"of the forwarder, TTL decremented and the IPv4 checksum updated, out of its other port) by the same counter in a third, " +
		"sink namespace, RX-drop by the receiver " +
		"(loss is against the generator's completions; xsk drops are the socket's XDP_STATISTICS rx_dropped + rx_ring_full). " +
		"CPU columns are CPU-seconds per million counted packets, medians over the runs: the measured program " +
		"and the generator process (on-CPU time of all their threads, exited ones included, read in ns from the " +
		"process's CPU clock, or the rusage of one that exited; the user/sys split in results.json is tick-sampled " +
		"from /proc/PID/stat, the total is not), and each CPU (user/sys/softirq, /proc/stat, in 10 ms ticks). " +
		"The generator or peer runs on CPU 0 and the measured program on CPU 1; veth runs the receiving side's XDP " +
		"and the copy into the receiver's UMEM on the sending CPU (CPU 0 for RX-drop and forwarding). " +
		"The whole machine's CPUs are counted: other work on it shows up there too.")
	if args := slices.Concat(xdpkitArgs, goArgs); len(args) > 0 {
		fmt.Fprintf(b, " xdpkit's receiver and forwarders ran with `%s` (`--runtime-sleep` is rxpath.Config.RuntimeSleep: "+
			"the Poller sleeps in the Go runtime's poller also while packets flow, instead of in ppoll on its own thread "+
			"as xdpbench sleeps in poll(2)).", strings.Join(args, " "))
	}
	b.WriteString("\n")
	hasTX := false
	for _, c := range r.XDP {
		hasTX = hasTX || c.Mode == "txonly"
	}
	if hasTX {
		b.WriteString("\nTX strategies, both run by both programs: *sender* kicks after each batch of 64 until the kernel " +
			"took it (txpath.Sender's; C xdpbench --drain), *ring* keeps the 2048-entry ring full and kicks when the kernel " +
			"asks (C xdpbench's default; xdpkitbench --tx ring, on xsk's rings).\n")
	}
	for _, fixed := range []bool{false, true} {
		var rows []XDPCase
		for _, c := range r.XDP {
			if (c.Rate > 0) == fixed {
				rows = append(rows, c)
			}
		}
		if len(rows) == 0 {
			continue
		}
		if fixed {
			b.WriteString("\n#### Fixed offered rate (C generator paced, 64 B): CPU per packet and loss\n\n")
			for _, c := range rows {
				if c.NAPIDeferral {
					fmt.Fprintf(b, "Rows marked *NAPI deferral*: the receiving veth's NAPIs had napi_defer_hard_irqs %d and "+
						"gro_flush_timeout %v (netdev napi-set, by the harness, for both implementations alike), so the kernel "+
						"hands the receiver batches instead of single packets, at up to that timeout in latency.\n\n", napiDefer, napiFlush)
					break
				}
			}
		} else {
			b.WriteString("\n#### Maximum rate\n\n")
		}
		ncpu := 0
		for _, c := range rows {
			ncpu = max(ncpu, len(c.CSum.CPUsPerM), len(c.GoSum.CPUsPerM))
		}
		b.WriteString("| case | impl | Mpps | xdpkit/C | loss | xsk drops | program CPU | generator CPU |")
		for i := 0; i < ncpu; i++ {
			fmt.Fprintf(b, " CPU %d usr/sys/si |", i)
		}
		b.WriteString(" Mpps per run | mallocs |\n|---|---|---:|---:|---:|---:|---:|---:|")
		for i := 0; i < ncpu; i++ {
			b.WriteString("---:|")
		}
		b.WriteString("---|---|\n")
		for _, c := range rows {
			name := rowName(c)
			for _, side := range []struct {
				impl string
				s    RunSummary
				runs []XDPRun
			}{{"C", c.CSum, c.C}, {"xdpkit", c.GoSum, c.Go}} {
				ratio := ""
				if side.impl == "xdpkit" && c.CMedian > 0 {
					ratio = fmt.Sprintf("%.2f", c.Ratio)
				}
				mpps := fmt.Sprintf("%.3f", side.s.Mpps)
				if c.Rate > 0 && side.s.OfferedMpps < 0.95*float64(c.Rate)/1e6 {
					mpps += fmt.Sprintf(" (offered %.3f: rate not reached)", side.s.OfferedMpps)
				}
				var drops []float64
				for _, run := range side.runs {
					drops = append(drops, float64(run.XSKDrops))
				}
				gen := "-"
				if c.Mode != "txonly" {
					gen = fmt.Sprintf("%.3f", side.s.GenPerM.Total())
				}
				loss := 100 * side.s.Loss
				if math.Abs(loss) < 0.005 {
					loss = 0 // no "-0.00%": a few frames completed but not reaped in time
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %.2f%% | %.0f | %.3f | %s |", name, side.impl, mpps, ratio,
					loss, median(drops), side.s.ProgPerM.Total(), gen)
				for i := 0; i < ncpu; i++ {
					var u CPUTime
					if i < len(side.s.CPUsPerM) {
						u = side.s.CPUsPerM[i]
					}
					fmt.Fprintf(b, " %.3f/%.3f/%.3f |", u.User, u.Sys, u.Softirq)
				}
				var mp []float64
				var ma []uint64
				for _, run := range side.runs {
					mp = append(mp, run.Mpps)
					ma = append(ma, run.Mallocs)
				}
				m := "-"
				if side.impl == "xdpkit" {
					m = ints(ma)
				}
				fmt.Fprintf(b, " %s | %s |\n", floats(mp), m)
			}
		}
		if fixed {
			writeWakeSplit(b, rows)
		}
	}
}

// rowName is an AF_XDP case's name in the report's tables and goals:
// "rxdrop 64 B @ 100 kpps, NAPI deferral", "txonly 64 B sender".
func rowName(c XDPCase) string {
	name := fmt.Sprintf("%s %d B", c.Mode, c.Size)
	if c.Strategy != "" {
		name += " " + c.Strategy
	}
	if c.Rate > 0 {
		name += " @ " + rateName(c.Rate)
	}
	if c.NAPIDeferral {
		name += ", NAPI deferral"
	}
	return name
}

// writeWakeSplit tabulates, for the fixed-rate rxdrop rows whose runs
// have the figures, the receiver's wake-ups and its CPU per wake-up,
// split between its busiest thread and the others: where a receiver that
// sleeps between batches spends its CPU.
func writeWakeSplit(b *strings.Builder, rows []XDPCase) {
	type line struct {
		name, impl                                        string
		perSec, naps, slices, pkts, busy, others, threads float64
	}
	var lines []line
	for _, c := range rows {
		if c.Mode != "rxdrop" {
			continue
		}
		name := rowName(c)
		for _, side := range []struct {
			impl string
			runs []XDPRun
		}{{"C", c.C}, {"xdpkit", c.Go}} {
			var perSec, naps, slices, pkts, busy, others, threads []float64
			for _, r := range side.runs {
				if r.Threads == nil || r.Wakeups == 0 || r.Seconds <= 0 {
					continue
				}
				w := float64(r.Wakeups)
				perSec = append(perSec, w/r.Seconds)
				naps = append(naps, float64(r.Naps)/r.Seconds)
				slices = append(slices, float64(r.Threads.Slices)/r.Seconds)
				pkts = append(pkts, float64(r.Frames)/w)
				busy = append(busy, r.Threads.Busiest/w*1e6)
				others = append(others, r.Threads.Others/w*1e6)
				threads = append(threads, float64(r.Threads.Threads))
			}
			if len(perSec) == 0 {
				continue
			}
			lines = append(lines, line{name, side.impl, median(perSec), median(naps), median(slices), median(pkts), median(busy), median(others), median(threads)})
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\nThe receivers' wake-ups (their own counts: the Poller's sleeps that a ready socket ended; xdpbench's polls " +
		"that found the socket ready, also those that returned without sleeping) and their on-CPU time per " +
		"wake-up, split between the busiest thread (usually the one that polls) and the program's other threads (for xdpkit the " +
		"Go runtime's: sysmon, idle Ms), from /proc/PID/task/*/schedstat; medians over the runs. " +
		"Where xdpkit naps (timer sleeps while packets flow, *naps/s*), its CPU per wake-up also pays for the naps, " +
		"so it compares with C's only in rows without naps; *runs/s* counts every time the busiest thread was put on a CPU " +
		"(wake-ups, naps, returns after preemption). The CPU is read from the generator's start to 200 ms after its end, " +
		"the counts cover the program's whole run, and the rates are per second of the generator's run.\n\n")
	b.WriteString("| case | impl | wake-ups/s | naps/s | runs/s | packets per wake-up | µs CPU per wake-up, busiest thread | other threads | threads |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range lines {
		fmt.Fprintf(b, "| %s | %s | %.0f | %.0f | %.0f | %.1f | %.2f | %.2f | %.0f |\n", l.name, l.impl, l.perSec, l.naps, l.slices, l.pkts, l.busy, l.others, l.threads)
	}
}

func floats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}

func ints(v []uint64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}
