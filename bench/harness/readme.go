package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// readmeReport renders the short section of README.md that make bench
// writes between the bench markers: the machine, the efficiency goals
// (csum's sizes folded into one row) and the headline AF_XDP rows' spread
// across the kept runs. It carries no commit, date or load average: those
// are in the full report (summary.md) and history.jsonl, which are data.
func readmeReport(r *Results) string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Written by `make bench` (`make bench-render` writes it again from bench/out). "+
		"Measured on %s (%d CPUs), Linux %s, %s, gcc %s; %d runs of %d s per implementation, alternated. "+
		"Every table: [bench/out/summary.md](bench/out/summary.md); what each row measures: [docs/benchmarks.md](docs/benchmarks.md).\n",
		m.CPU, m.CPUs, kernelVersion(m.Kernel), m.Go, m.GCC, r.Runs, r.Seconds)

	ts := allTargets(r)
	if len(ts) > 0 {
		met := 0
		for _, t := range ts {
			if t.Met {
				met++
			}
		}
		fmt.Fprintf(&b, "\n| goal (xdpkit/C in this run: %d of %d met) | compared | xdpkit/C | spread | |\n|---|---|---:|---|---|\n", met, len(ts))
		var sums []Target
		// The latency goals (p50, p99 and CPU per fixed rate) share one
		// row per rate here, to keep README short; summary.md has each.
		var latNames []string
		lat := map[string][]Target{}
		// The maximum-rate Mpps goals share one row per mode (its
		// frame sizes side by side), where the mode's first one was.
		var rows []string
		maxAt := map[string]int{} // mode: its row in rows
		maxRate := map[string][]Target{}
		for _, t := range ts {
			if t.What == "speed" {
				sums = append(sums, t)
				continue
			}
			if mode, _, ok := strings.Cut(t.Name, " "); ok && t.What == "Mpps" && strings.Contains(t.Name, ", max rate") {
				if maxRate[mode] == nil {
					maxAt[mode] = len(rows)
					rows = append(rows, "")
				}
				maxRate[mode] = append(maxRate[mode], t)
				continue
			}
			if strings.HasPrefix(t.Name, "latency ") {
				if lat[t.Name] == nil {
					latNames = append(latNames, t.Name)
				}
				lat[t.Name] = append(lat[t.Name], t)
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %.2f-%.2f | %s |\n", t.Name, targetWhat(t.What), ratio2(t.Ratio), t.RunLo, t.RunHi, targetVerdict(t)))
		}
		for mode, at := range maxAt {
			var sizes, ratios, spreads []string
			fastest := false
			for _, t := range maxRate[mode] {
				size, _, _ := strings.Cut(strings.TrimPrefix(t.Name, mode+" "), ",")
				sizes = append(sizes, strings.TrimSuffix(size, " B"))
				r := ratio2(t.Ratio)
				if t.Against != "" && t.Against != "C reference" {
					r += " (" + t.Against + ")"
				}
				ratios = append(ratios, r)
				spreads = append(spreads, fmt.Sprintf("%.2f-%.2f", t.RunLo, t.RunHi))
				fastest = fastest || t.Against != ""
			}
			what := targetWhat("Mpps")
			if fastest {
				what = "Mpps against the fastest C (higher is better)"
			}
			rows[at] = fmt.Sprintf("| %s %s B, max rate | %s | %s | %s | %s |\n", mode, strings.Join(sizes, " / "), what,
				strings.Join(ratios, ", "), strings.Join(spreads, ", "), groupVerdict(maxRate[mode]))
		}
		b.WriteString(strings.Join(rows, ""))
		for _, name := range latNames {
			var what, ratios, spreads []string
			for _, t := range lat[name] {
				what = append(what, t.What)
				ratios = append(ratios, ratio2(t.Ratio))
				spreads = append(spreads, fmt.Sprintf("%.2f-%.2f", t.RunLo, t.RunHi))
			}
			fmt.Fprintf(&b, "| %s | %s (lower is better) | %s | %s | %s |\n", name, strings.Join(what, ", "),
				strings.Join(ratios, ", "), strings.Join(spreads, ", "), groupVerdict(lat[name]))
		}
		if len(sums) > 0 {
			lo, hi, met := sums[0], sums[0], 0
			for _, t := range sums {
				if t.Ratio < lo.Ratio {
					lo = t
				}
				if t.Ratio > hi.Ratio {
					hi = t
				}
				if t.Met {
					met++
				}
			}
			fmt.Fprintf(&b, "| csum.Sum at %d sizes (paired) | %s | %s-%s | lowest at %s | %d of %d met |\n", len(sums),
				targetWhat("speed"), ratio2(lo.Ratio), ratio2(hi.Ratio), sumSize(lo.Name), met, len(sums))
		}
	}

	if len(r.History) > 0 {
		mach := r.History[len(r.History)-1].machine()
		var same []HistoryEntry
		for _, h := range r.History {
			if h.machine() == mach {
				same = append(same, h)
			}
		}
		head := []string{"txonly 64 B (sender)", "rxdrop 64 B", "rxdrop 64 B at 100 kpps", "fwd 64 B", "l3fwd 64 B", "l3fwd 1500 B"}
		rows := map[string][2][]float64{}
		for _, h := range same {
			for _, x := range h.XDP {
				if !slices.Contains(head, x.Case) {
					continue
				}
				v := rows[x.Case]
				v[0] = append(v[0], x.Ratio)
				v[1] = append(v[1], x.GoProgCPU/max(x.CProgCPU, 1e-9))
				rows[x.Case] = v
			}
		}
		fmt.Fprintf(&b, "\nAcross the %d kept runs on this machine (bench/out/history.jsonl), min / median / max of each run's median:\n\n", len(same))
		b.WriteString("| AF_XDP case | xdpkit/C Mpps | xdpkit/C program CPU per packet |\n|---|---:|---:|\n")
		for _, c := range head {
			if v, ok := rows[c]; ok {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", c, spread(v[0]), spread(v[1]))
			}
		}
	}
	return b.String()
}

func targetWhat(what string) string {
	switch what {
	case "CPU":
		return "receiver CPU per packet (lower is better)"
	case "speed":
		return "speed against the best C kernel (higher is better)"
	case "p50", "p99":
		return "one-way delay " + what + " (lower is better)"
	}
	return "Mpps (higher is better)"
}

// groupVerdict is the verdict of a row that joins several goals: met
// when every one is, not met when one is missed beyond its spread, else
// met within spread (as targetVerdict says of one goal).
func groupVerdict(ts []Target) string {
	all := true
	for _, t := range ts {
		if t.Missed {
			return "not met"
		}
		all = all && t.Met
	}
	if all {
		return "met"
	}
	return "met within spread"
}

// sumSize is the size in a csum goal's name ("csum.Sum 64 B (paired)").
func sumSize(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(name, "csum.Sum "), " (paired)")
}

// kernelVersion is the leading version of a kernel release string
// ("6.18.44" of "6.18.44-fc-v1045"): a distribution's suffix may hold a
// build hash, which README's text check refuses.
func kernelVersion(release string) string {
	if v := regexp.MustCompile(`^[0-9]+(\.[0-9]+)*`).FindString(release); v != "" {
		return v
	}
	return release
}
