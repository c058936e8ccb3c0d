package main

import (
	"fmt"
	"strings"
)

// Target is one of the efficiency goals that make bench judges in every
// run: xdpkit against the C reference on the same case, in the same run;
// a forwarding goal at the maximum rate against the fastest C forwarder
// that ran the case (the C reference or xsksample).
type Target struct {
	// Name is the case as the AF_XDP tables name it, with "against
	// xsksample" where that was the fastest C forwarder.
	Name string `json:"name"`
	// Against is the C program compared with: "C reference" or
	// "xsksample" (forwarding goals), empty for the others (the C
	// reference, csum's best C kernel, C poll(2)).
	Against string `json:"against,omitempty"`
	// What is compared: "Mpps" (higher is better), "CPU" (the measured
	// program's CPU-seconds per million counted packets, its on-CPU
	// time read in ns; lower
	// is better), "speed" (csum's paired comparison: C's ns over Go's,
	// higher is better) or "p50" and "p99" (the latency rows' one-way
	// delay, lower is better).
	What string `json:"what"`
	// Ratio is xdpkit/C of the medians over the runs.
	Ratio float64 `json:"ratio"`
	// RunLo and RunHi are the smallest and largest xdpkit/C of the runs
	// paired as they alternated (run i of C, or of Against, then run i
	// of xdpkit); for csum the 10th and 90th percentiles of the
	// per-block ratios.
	RunLo float64 `json:"run_lo"`
	RunHi float64 `json:"run_hi"`
	// Met: Ratio >= 1 for Mpps; for CPU, Ratio <= 1 and xdpkit lost at
	// most 1% of the sent frames more than C, its generator having offered
	// the rate wherever C's did (equal offered load, or more where only
	// the generator facing C missed the rate: then the row's name says
	// so, and the loads differ).
	Met bool `json:"met"`
	// Missed: a miss beyond the spread, which no pairing of the runs
	// explains: not met, and every paired run on the wrong side of 1.00
	// (RunHi < 1 for Mpps and speed, RunLo > 1 for CPU), or xdpkit
	// lost more than that (a CPU row). A goal neither Met nor Missed
	// is met within its spread.
	Missed bool `json:"missed"`
}

// judge sets t.Missed from t.Met and the spread; delivered is false when a
// CPU row's xdpkit side delivered too few packets.
func (t *Target) judge(delivered bool) {
	switch {
	case t.Met:
		t.Missed = false
	case t.What == "CPU" || t.What == "p50" || t.What == "p99":
		t.Missed = !delivered || t.RunLo > 1
	default:
		t.Missed = t.RunHi < 1
	}
}

// targetVerdict is a goal's verdict in words.
func targetVerdict(t Target) string {
	switch {
	case t.Met:
		return "met"
	case t.Missed:
		return "not met"
	}
	return "met within spread"
}

// missedGoals counts the goals missed beyond their spread.
func missedGoals(ts []Target) int {
	n := 0
	for _, t := range ts {
		if t.Missed {
			n++
		}
	}
	return n
}

// forwarding: the modes whose maximum-rate goal is against the fastest C
// forwarder of the run.
func forwarding(mode string) bool {
	return mode == "fwd" || mode == "l3fwd" || mode == "hairpin"
}

// fastestC is the C program a forwarding goal compares with: of those
// that ran the case (the C reference, and xsksample where it has a
// counterpart), the one with the highest median Mpps; its median and
// runs.
func fastestC(c XDPCase) (name string, med float64, runs []XDPRun) {
	name, med, runs = "C reference", c.CMedian, c.C
	if c.Sample != nil && len(c.Sample.Runs) > 0 && c.Sample.Sum.Mpps > med {
		name, med, runs = "xsksample", c.Sample.Sum.Mpps, c.Sample.Runs
	}
	return name, med, runs
}

// targets derives the efficiency goals from the AF_XDP cases and csum's
// paired comparison: forwarding (fwd, hairpin, l3fwd) at maximum rate by
// Mpps against the fastest C forwarder of the case, RX-drop at maximum
// rate by Mpps against the C reference, RX-drop at the fixed offered
// rates by the receiver's CPU per packet, csum.Sum at every size by its
// speed against the best C kernel.
func targets(cases []XDPCase, paired []PairedResult) []Target {
	var out []Target
	for _, c := range cases {
		name := rowName(c) // no rate for the max-rate rows, no strategy outside txonly
		if c.Rate == 0 && forwarding(c.Mode) {
			against, med, runs := fastestC(c)
			if len(c.Go) == 0 || len(runs) == 0 || med <= 0 {
				continue
			}
			t := Target{Name: name + ", max rate", Against: against, What: "Mpps", Ratio: c.GoMedian / med}
			if against != "C reference" {
				t.Name += ", against " + against
			}
			t.RunLo, t.RunHi = pairRuns(runs, c.Go, func(r XDPRun) float64 { return r.Mpps })
			t.Met = t.Ratio >= 1
			t.judge(true)
			out = append(out, t)
			continue
		}
		if len(c.C) == 0 || len(c.Go) == 0 || c.CMedian <= 0 {
			continue
		}
		switch {
		case c.Rate == 0 && c.Mode == "rxdrop":
			t := Target{Name: name + ", max rate", What: "Mpps", Ratio: c.Ratio}
			t.RunLo, t.RunHi = pairRange(c, func(r XDPRun) float64 { return r.Mpps })
			t.Met = t.Ratio >= 1
			t.judge(true)
			out = append(out, t)
		case c.Rate > 0 && c.Mode == "rxdrop" && (reached(c.CSum, c.Rate) || reached(c.GoSum, c.Rate)):
			for _, side := range []struct {
				impl string
				s    RunSummary
			}{{"C", c.CSum}, {"xdpkit", c.GoSum}} {
				if !reached(side.s, c.Rate) {
					name += fmt.Sprintf(" (unequal load: %s's generator reached %.3f Mpps)", side.impl, side.s.OfferedMpps)
				}
			}
			cc, gc := c.CSum.ProgPerM.Total(), c.GoSum.ProgPerM.Total()
			if cc <= 0 {
				continue
			}
			t := Target{Name: name, What: "CPU", Ratio: gc / cc}
			t.RunLo, t.RunHi = pairRange(c, func(r XDPRun) float64 { return r.ProgPerM.Total() })
			// xdpkit lost at most 1% of the sent frames more than C, and
			// its generator offered the rate wherever C's did. Not the
			// delivered rates: a generator that falls behind in some runs
			// (it shares its CPU with veth's copy) lowers both sides'
			// medians by different amounts at the same loss.
			delivered := c.GoSum.Loss <= c.CSum.Loss+0.01 && (reached(c.GoSum, c.Rate) || !reached(c.CSum, c.Rate))
			t.Met = t.Ratio <= 1 && delivered
			t.judge(delivered)
			out = append(out, t)
		}
	}
	for _, p := range paired {
		if p.Bench != "sum" || p.Ratio <= 0 {
			continue
		}
		t := Target{Name: fmt.Sprintf("csum.Sum %d B (paired)", p.Size), What: "speed",
			Ratio: p.Ratio, RunLo: p.P10, RunHi: p.P90, Met: p.Ratio >= 1}
		t.judge(true)
		out = append(out, t)
	}
	return out
}

// allTargets are every goal of a run: targets' and the latency rows'.
func allTargets(r *Results) []Target {
	return append(targets(r.XDP, r.Paired), latencyTargets(r.Latency)...)
}

// reached: the generator offered the case's rate (within 5%). A row whose
// rate neither generator reached is a maximum-rate row in disguise; one
// that only the generator facing C missed (its CPU also runs veth's XDP
// and the copy into the receiver's UMEM, and the receiver's wake-ups) is
// judged, with a note.
func reached(s RunSummary, rate int) bool {
	return s.OfferedMpps >= 0.95*float64(rate)/1e6
}

// pairRange is the range of xdpkit/C over the runs paired by index.
func pairRange(c XDPCase, f func(XDPRun) float64) (lo, hi float64) {
	return pairRuns(c.C, c.Go, f)
}

// pairRuns is the range of f(xdpkit)/f(ref) over the runs paired by index.
func pairRuns(ref, xdpkit []XDPRun, f func(XDPRun) float64) (lo, hi float64) {
	n := min(len(ref), len(xdpkit))
	first := true
	for i := 0; i < n; i++ {
		d := f(ref[i])
		if d <= 0 {
			continue
		}
		r := f(xdpkit[i]) / d
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

// writeTargets writes the efficiency goals as one table with a verdict per
// row.
func writeTargets(b *strings.Builder, ts []Target) {
	if len(ts) == 0 {
		return
	}
	met := 0
	for _, t := range ts {
		if t.Met {
			met++
		}
	}
	fmt.Fprintf(b, "\n### Efficiency goals in this run: %d of %d met, %d missed beyond their spread\n\n", met, len(ts), missedGoals(ts))
	b.WriteString("xdpkit/C from the tables below, of the medians over the runs; *spread* is the range of xdpkit/C " +
		"over the runs paired as they alternated (for csum: the 10th-90th percentiles over the blocks). Mpps and speed " +
		"rows are met at 1.00 or more (speed: C's ns over Go's). The forwarding rows at the maximum rate (fwd, hairpin, l3fwd) " +
		"compare with the fastest C forwarder that ran the case, by its median: the C reference, or xsksample where it ran the case " +
		"and was faster (then the row says so, and the spread pairs its runs with xdpkit's). CPU rows compare the receiver's " +
		"CPU-seconds per million packets (its on-CPU time, read in ns) and are met at 1.00 or less, when xdpkit lost at most 1% of the sent " +
		"frames more than C (and its generator offered the rate wherever C's did). A goal not met is *met within spread* when its spread " +
		"reaches the goal (some paired run met it); it is *not met* only when the whole spread misses it (or xdpkit lost more), " +
		"and only such a miss makes make bench exit non-zero.\n\n")
	b.WriteString("| goal | compared | xdpkit/C | spread | |\n|---|---|---:|---|---|\n")
	for _, t := range ts {
		v := targetVerdict(t)
		what := "Mpps (higher is better)"
		switch t.What {
		case "CPU":
			what = "receiver CPU per packet (lower is better)"
		case "speed":
			what = "speed against the best C kernel (higher is better)"
		case "p50", "p99":
			what = "one-way delay " + t.What + " (lower is better)"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.2f-%.2f | %s |\n", t.Name, what, ratio2(t.Ratio), t.RunLo, t.RunHi, v)
	}
}

// ratio2 prints a ratio with two decimals, or more where two would round
// it to 1.00 from either side (the verdicts are strict).
func ratio2(r float64) string { return ratioDigits(r, 2) }

// ratioDigits prints r with d decimals, or up to three more where d
// would round it to exactly 1 from either side.
func ratioDigits(r float64, d int) string {
	for n := d; n < d+3; n++ {
		if s := fmt.Sprintf("%.*f", n, r); r == 1 || s != fmt.Sprintf("%.*f", n, 1.0) {
			return s
		}
	}
	return fmt.Sprintf("%.*f", d+3, r)
}
