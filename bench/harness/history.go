package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// HistoryEntry is one line of history.jsonl: one full `make bench` run,
// kept in git so that the report can show the spread across runs rather
// than one run.
type HistoryEntry struct {
	Commit  string  `json:"commit"`
	Date    string  `json:"date"`
	CPU     string  `json:"cpu"`
	CPUs    int     `json:"cpus"`
	Kernel  string  `json:"kernel"`
	Go      string  `json:"go"`
	GCC     string  `json:"gcc"`
	Load    string  `json:"loadavg"`
	Elapsed float64 `json:"elapsed_seconds"`
	// XDPKitArgs are the arguments the harness gave xdpkitbench as the
	// measured receiver or forwarder beyond the C program's (xdpkitArgs);
	// empty in the oldest lines.
	XDPKitArgs []string `json:"xdpkit_args,omitempty"`

	XDP   []HistoryXDP   `json:"xdp,omitempty"`
	Micro []HistoryMicro `json:"micro,omitempty"`
	Grid  *HistoryGrid   `json:"grid,omitempty"`
	// Deliver is rxpath's BenchmarkDeliver: ns per packet by mode and
	// size, and the threshold it gives.
	Deliver *Deliver `json:"deliver,omitempty"`
}

// HistoryXDP is one AF_XDP row: medians of each implementation.
type HistoryXDP struct {
	Case       string  `json:"case"`
	CMpps      float64 `json:"c_mpps"`
	GoMpps     float64 `json:"xdpkit_mpps"`
	Ratio      float64 `json:"ratio"`
	CLoss      float64 `json:"c_loss"`
	GoLoss     float64 `json:"xdpkit_loss"`
	CProgCPU   float64 `json:"c_prog_cpu_s_per_mpkt"`
	GoProgCPU  float64 `json:"xdpkit_prog_cpu_s_per_mpkt"`
	CTotalCPU  float64 `json:"c_all_cpus_cpu_s_per_mpkt"`
	GoTotalCPU float64 `json:"xdpkit_all_cpus_cpu_s_per_mpkt"`
}

// HistoryMicro is one micro-benchmark figure.
type HistoryMicro struct {
	Name string  `json:"name"`
	GBps float64 `json:"gbps"`
}

// HistoryGrid is the copy-policy grid's verdict.
type HistoryGrid struct {
	// NT is nt's calibration (nt.Default) of the run.
	NT     string   `json:"nt_calibration"`
	Passed int      `json:"cells_passed"`
	Cells  int      `json:"cells"`
	Failed []string `json:"failed,omitempty"`
	// Starts is the grid's start-up measurements (absent: one); Spread
	// the cells that passed, but not in every start.
	Starts int      `json:"starts,omitempty"`
	Spread []string `json:"within_spread,omitempty"`
}

func (h *HistoryEntry) machine() string {
	return fmt.Sprintf("%s, %d CPUs, Linux %s", h.CPU, h.CPUs, h.Kernel)
}

func xdpCaseName(c XDPCase) string {
	return caseName(xdpCase{mode: c.Mode, size: c.Size, rate: c.Rate, strategy: c.Strategy, napi: c.NAPIDeferral})
}

func microName(m MicroResult) string {
	s := fmt.Sprintf("%s %s %s %d", m.Lang, m.Bench, m.Impl, m.Size)
	if m.Where != "" {
		s += " " + m.Where
	}
	return s
}

func allCPUs(s RunSummary) float64 {
	t := 0.0
	for _, u := range s.CPUsPerM {
		t += u.Total()
	}
	return t
}

// historyOf makes r's history line.
func historyOf(r *Results) HistoryEntry {
	m := r.Machine
	h := HistoryEntry{Commit: m.Commit, Date: m.Date, CPU: m.CPU, CPUs: m.CPUs, Kernel: m.Kernel, Go: m.Go, GCC: m.GCC,
		Load: m.Load, Elapsed: r.Elapsed, XDPKitArgs: xdpkitArgs}
	for _, c := range r.XDP {
		h.XDP = append(h.XDP, HistoryXDP{Case: xdpCaseName(c), CMpps: c.CMedian, GoMpps: c.GoMedian, Ratio: c.Ratio,
			CLoss: c.CSum.Loss, GoLoss: c.GoSum.Loss, CProgCPU: c.CSum.ProgPerM.Total(), GoProgCPU: c.GoSum.ProgPerM.Total(),
			CTotalCPU: allCPUs(c.CSum), GoTotalCPU: allCPUs(c.GoSum)})
	}
	for _, x := range r.Micro {
		h.Micro = append(h.Micro, HistoryMicro{Name: microName(x), GBps: x.GBps})
	}
	h.Deliver = r.Deliver
	if g := r.Grid; g != nil {
		hg := &HistoryGrid{Cells: len(g.Cells), NT: ntThreshold(g.Calib.Threshold), Starts: g.Starts}
		for _, c := range g.Cells {
			if c.Pass {
				hg.Passed++
			} else {
				hg.Failed = append(hg.Failed, cellName(c))
			}
			if c.Spread() {
				hg.Spread = append(hg.Spread, cellName(c))
			}
		}
		h.Grid = hg
	}
	return h
}

// ntThreshold names nt's calibrated threshold.
func ntThreshold(t int) string {
	if t <= 0 {
		return "never"
	}
	return fmt.Sprintf("from %d B", t)
}

// readHistory reads history.jsonl (none yet: no entries).
func readHistory(path string) ([]HistoryEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hs []HistoryEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var h HistoryEntry
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		hs = append(hs, h)
	}
	return hs, sc.Err()
}

// appendHistory appends h to path as one JSON line.
func appendHistory(path string, h HistoryEntry) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return errors.Join(err, f.Close())
}

// spread is min, median and max.
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f / %.3f / %.3f", slices.Min(v), median(v), slices.Max(v))
}

// writeHistory writes the spread across the kept runs on this machine
// (history entries with the same CPU model, CPU count and kernel as the
// last one, which is this run's).
func writeHistory(b *strings.Builder, hs []HistoryEntry) {
	if len(hs) == 0 {
		return
	}
	mach := hs[len(hs)-1].machine()
	var same []HistoryEntry
	for _, h := range hs {
		if h.machine() == mach {
			same = append(same, h)
		}
	}
	fmt.Fprintf(b, "\n### Spread across the %d kept runs on this machine (bench/out/history.jsonl)\n\n", len(same))
	b.WriteString("Each run's figure is its median; the table gives min / median / max across runs, this one included. " +
		"Runs (commit, date, load average at start; xdpkitbench's extra arguments as the receiver or forwarder, where it had any: " +
		"runs listed without any mix the Poller's two ways of sleeping into the receiving rows' spread):")
	for _, h := range same {
		args := ""
		if len(h.XDPKitArgs) > 0 {
			args = "; xdpkitbench " + strings.Join(h.XDPKitArgs, " ")
		}
		fmt.Fprintf(b, " %s %s (%s%s);", h.Commit, strings.TrimSuffix(h.Date, " UTC"), h.Load, args)
	}
	b.WriteString("\n\n")
	var cases []string
	vals := map[string][][]float64{}
	for _, h := range same {
		for _, x := range h.XDP {
			if _, ok := vals[x.Case]; !ok {
				cases = append(cases, x.Case)
				vals[x.Case] = make([][]float64, 4)
			}
			v := vals[x.Case]
			v[0] = append(v[0], x.CMpps)
			v[1] = append(v[1], x.GoMpps)
			v[2] = append(v[2], x.Ratio)
			v[3] = append(v[3], x.GoProgCPU/max(x.CProgCPU, 1e-9))
		}
	}
	if len(cases) > 0 {
		b.WriteString("| AF_XDP case | runs | C Mpps | xdpkit Mpps | xdpkit/C Mpps | xdpkit/C program CPU per packet |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|\n")
		for _, c := range cases {
			v := vals[c]
			fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s |\n", c, len(v[0]), spread(v[0]), spread(v[1]), spread(v[2]), spread(v[3]))
		}
	}
	var grid []string
	for _, h := range same {
		if h.Grid != nil {
			s := fmt.Sprintf("%d/%d", h.Grid.Passed, h.Grid.Cells)
			if h.Grid.Starts > 1 {
				s += fmt.Sprintf(" (%d starts)", h.Grid.Starts)
			}
			grid = append(grid, s)
		}
	}
	if len(grid) > 0 {
		fmt.Fprintf(b, "\nCopy-policy grid, cells passed per run: %s.\n", strings.Join(grid, ", "))
	}
	var nts []string
	for _, h := range same {
		if h.Grid != nil && h.Grid.NT != "" {
			nts = append(nts, h.Grid.NT)
		}
	}
	if len(nts) > 0 {
		fmt.Fprintf(b, "\nnt calibration (NT copy wins) per run: %s.\n", strings.Join(nts, ", "))
	}
	var thr []string
	byRun := map[int][]float64{} // size -> copy/keep of each run that has it
	var sizes []int
	for _, h := range same {
		d := h.Deliver
		if d == nil {
			continue
		}
		thr = append(thr, fmt.Sprint(d.Threshold))
		if len(d.CopyKeep) != len(d.Sizes) {
			continue // an older line, without paired ratios
		}
		for i, sz := range d.Sizes {
			if _, ok := byRun[sz]; !ok {
				sizes = append(sizes, sz)
			}
			byRun[sz] = append(byRun[sz], d.CopyKeep[i])
		}
	}
	if len(thr) > 0 {
		fmt.Fprintf(b, "\nCopy threshold from BenchmarkDeliver per run (bytes): %s.\n", strings.Join(thr, ", "))
	}
	if len(sizes) > 0 {
		slices.Sort(sizes)
		b.WriteString("\n| BenchmarkDeliver size | runs | copy/keep (paired median per run): min / median / max |\n|---:|---:|---:|\n")
		threshold := 0
		for _, sz := range sizes {
			v := byRun[sz]
			fmt.Fprintf(b, "| %d | %d | %s |\n", sz, len(v), spread(v))
		}
		for _, sz := range sizes {
			if median(byRun[sz]) > 1 {
				break
			}
			threshold = sz
		}
		fmt.Fprintf(b, "\nBy the median across these runs, copy is not slower than keep up to %d B "+
			"(rxpath.DefaultCopyThreshold: the largest such size).\n", threshold)
	}
}

// The README section that make bench writes: readmeReport's short
// summary, between these markers (each on a line of its own).
const (
	readmeStart = "<!-- bench:start -->\n"
	readmeEnd   = "<!-- bench:end -->\n"
)

// readmeSection returns what README holds between the markers.
func readmeSection(readme []byte) (before, section, after []byte, err error) {
	i := bytes.Index(readme, []byte(readmeStart))
	j := bytes.Index(readme, []byte(readmeEnd))
	if i < 0 || j < i {
		return nil, nil, nil, fmt.Errorf("README: no %q ... %q section", strings.TrimSpace(readmeStart), strings.TrimSpace(readmeEnd))
	}
	return readme[:i+len(readmeStart)], readme[i+len(readmeStart) : j], readme[j:], nil
}

// writeReadme replaces the section of the README at path with summary.
func writeReadme(path, summary string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	before, _, after, err := readmeSection(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out := slices.Concat(before, []byte(summary), after)
	return os.WriteFile(path, out, 0o644)
}
