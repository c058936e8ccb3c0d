package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/xdpkit/xdpkit/rxpath"
)

// Deliver is rxpath's BenchmarkDeliver: ns per packet for each way a
// packet reaches a handler and its frame gets back to the Fill ring, by
// packet size, and the copy threshold those figures give.
type Deliver struct {
	Sizes []int `json:"sizes"`
	// Ns maps a mode (copy, keep, keep1, lend) to the median over the
	// rounds of ns per packet, one per size.
	Ns map[string][]float64 `json:"ns_per_packet"`
	// CopyKeep is, per size, the median over the rounds of copy's time
	// over keep's in the same round (one run of the benchmark binary runs
	// every mode and size once, copy and keep of a size one after the
	// other, so they see the same interference).
	CopyKeep []float64 `json:"copy_over_keep"`
	// Threshold is the largest size up to which CopyKeep is at most 1 at
	// every measured size (0: not even at the smallest); Default is
	// rxpath.DefaultCopyThreshold.
	Threshold int `json:"threshold"`
	Default   int `json:"default"`
	Rounds    int `json:"rounds"`
}

var deliverModes = []string{"copy", "keep", "keep1", "lend"}

func runDeliver(ctx context.Context, c *config, dir string) (*Deliver, error) {
	cpu := -1
	if c.pin {
		cpu = c.measCPU
	}
	benchtime, rounds := "50ms", 9
	if c.quick {
		benchtime, rounds = "5ms", 1
	}
	bin := filepath.Join(dir, "rxpath.test")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./rxpath")
	cmd.Dir = c.repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c ./rxpath: %w\n%s", err, b)
	}
	logf("deliver: rxpath -bench Deliver, %d rounds", rounds)
	var outs [][]byte
	for range rounds {
		out, err := pinned(ctx, cpu, filepath.Join(c.repo, "rxpath"), bin, "-test.run", "^$", "-test.bench", "^BenchmarkDeliver$",
			"-test.benchtime", benchtime, "-test.count", "1")
		if err != nil {
			return nil, err
		}
		outs = append(outs, out)
	}
	return parseDeliver(outs)
}

// parseDeliver reads the BenchmarkDeliver/MODE/SIZE lines of each round.
func parseDeliver(outs [][]byte) (*Deliver, error) {
	d := &Deliver{Ns: map[string][]float64{}, Default: rxpath.DefaultCopyThreshold, Rounds: len(outs)}
	all := map[string]map[int][]float64{}
	ratios := map[int][]float64{}
	for _, out := range outs {
		if err := parseDeliverRound(out, d, all, ratios); err != nil {
			return nil, err
		}
	}
	if len(d.Sizes) == 0 {
		return nil, fmt.Errorf("BenchmarkDeliver: no results\n%s", bytes.Join(outs, nil))
	}
	slices.Sort(d.Sizes)
	for _, m := range deliverModes {
		for _, s := range d.Sizes {
			d.Ns[m] = append(d.Ns[m], median(all[m][s]))
		}
	}
	for _, s := range d.Sizes {
		d.CopyKeep = append(d.CopyKeep, median(ratios[s]))
	}
	for i, s := range d.Sizes {
		if d.CopyKeep[i] > 1 {
			break
		}
		d.Threshold = s
	}
	return d, nil
}

// parseDeliverRound adds one round's figures to all (mode, size) and its
// copy/keep ratios to ratios (by size).
func parseDeliverRound(out []byte, d *Deliver, all map[string]map[int][]float64, ratios map[int][]float64) error {
	round := map[string]map[int]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkDeliver/") || f[3] != "ns/op" {
			continue
		}
		name := strings.Split(f[0], "/")
		if len(name) != 3 {
			continue
		}
		sz := name[2]
		if i := strings.LastIndex(sz, "-"); i > 0 {
			sz = sz[:i] // the GOMAXPROCS suffix
		}
		size, err1 := strconv.Atoi(sz)
		ns, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if all[name[1]] == nil {
			all[name[1]] = map[int][]float64{}
		}
		if round[name[1]] == nil {
			round[name[1]] = map[int]float64{}
		}
		all[name[1]][size] = append(all[name[1]][size], ns)
		round[name[1]][size] = ns
		if !slices.Contains(d.Sizes, size) {
			d.Sizes = append(d.Sizes, size)
		}
	}
	for size, c := range round["copy"] {
		if k, ok := round["keep"][size]; ok && k > 0 {
			ratios[size] = append(ratios[size], c/k)
		}
	}
	return nil
}

func writeDeliver(b *strings.Builder, d *Deliver) {
	fmt.Fprintf(b, "\n### Receive delivery: copy or lend (rxpath BenchmarkDeliver), ns per packet, median of %d rounds\n\n", d.Rounds)
	b.WriteString("copy: copied into the handler's buffer, frame straight back to the Fill ring; keep: lent and kept by " +
		"the handler, which hands the frames back with one PutBatch per batch of 64, the refill taking them from the " +
		"allocator to the Fill ring; keep1: keep with one Put per frame; lend: read in place. Every mode puts each batch's " +
		"frames on a (modelled) Fill ring. copy/keep is the median over the rounds of copy's time over keep's in the same round. ")
	fmt.Fprintf(b, "copy/keep is at most 1 up to %d B here; rxpath.DefaultCopyThreshold is %d B.\n\n", d.Threshold, d.Default)
	b.WriteString("| size |")
	for _, m := range deliverModes {
		fmt.Fprintf(b, " %s |", m)
	}
	b.WriteString(" copy/keep |\n|---:|")
	for range deliverModes {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	for i, s := range d.Sizes {
		fmt.Fprintf(b, "| %d |", s)
		for _, m := range deliverModes {
			fmt.Fprintf(b, " %.1f |", d.Ns[m][i])
		}
		fmt.Fprintf(b, " %.2f |\n", d.CopyKeep[i])
	}
}
