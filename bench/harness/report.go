package main

import (
	"fmt"
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

	if len(r.XDP) > 0 {
		b.WriteString("\n### AF_XDP on veth (copy mode), Mpps, median\n\n")
		b.WriteString("| mode | frame | C xdpbench | xdpkit | xdpkit/C | runs C | runs xdpkit | xdpkit mallocs |\n")
		b.WriteString("|---|---:|---:|---:|---:|---|---|---|\n")
		for _, c := range r.XDP {
			fmt.Fprintf(&b, "| %s | %d B | %.3f | %.3f | %.2f | %s | %s | %s |\n", c.Mode, c.Size, c.CMedian, c.GoMedian,
				c.Ratio, floats(c.C), floats(c.Go), ints(c.GoMallocs))
		}
	}
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
		fmt.Fprintf(&b, "\n### Copy-policy grid, GB/s (best of %d rounds; median in parentheses; bold: best fixed method): auto within %.0f%% of the best fixed method: %s\n\n",
			g.Rounds, g.Tolerance*100, verdict)
		b.WriteString("auto/best is the median over the rounds of auto's GB/s over the best fixed method's in the same round. ")
		fmt.Fprintf(&b, "One txpath.ChooseCopy call costs %.1f ns; the grid asks it once per batch of 64 copies.\n\n", g.ChooseNs)
		fmt.Fprintf(&b, "nt calibration: %s\n\n", g.Calib)
		b.WriteString("| size | dest | checksum | nt / nt+sum | copy / copy+sum | fused | auto (choice) | auto/best | |\n")
		b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---|\n")
		for _, c := range g.Cells {
			ntName, cpName := "nt", "copy"
			if !c.Offload {
				ntName, cpName = "nt+sum", "copy+sum"
			}
			v := "PASS"
			if !c.Pass {
				v = "FAIL"
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s (%s) | %.3f | %s |\n", c.Size, temp(c.Cold), offl(c.Offload),
				fig(c, ntName), fig(c, cpName), fig(c, "fused"), fig(c, "auto"), c.Auto, c.Ratio, v)
		}
	}
	return b.String()
}

func fig(c GridCell, name string) string {
	f := c.Methods[name]
	s := fmt.Sprintf("%.1f (%.1f)", f.Best, f.Median)
	if name == c.Best {
		s = "**" + s + "**"
	}
	return s
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
