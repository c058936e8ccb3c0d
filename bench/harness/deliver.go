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
	// counts of ns per packet, one per size.
	Ns map[string][]float64 `json:"ns_per_packet"`
	// Threshold is the largest size up to which copy was not slower than
	// keep at every measured size (0: not at 64 B); Default is
	// rxpath.DefaultCopyThreshold.
	Threshold int `json:"threshold"`
	Default   int `json:"default"`
	Count     int `json:"count"`
}

var deliverModes = []string{"copy", "keep", "keep1", "lend"}

func runDeliver(ctx context.Context, c *config, dir string) (*Deliver, error) {
	cpu := -1
	if c.pin {
		cpu = c.measCPU
	}
	benchtime, count := "100ms", 5
	if c.quick {
		benchtime, count = "10ms", 1
	}
	bin := filepath.Join(dir, "rxpath.test")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./rxpath")
	cmd.Dir = c.repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c ./rxpath: %w\n%s", err, b)
	}
	logf("deliver: rxpath -bench Deliver")
	out, err := pinned(ctx, cpu, filepath.Join(c.repo, "rxpath"), bin, "-test.run", "^$", "-test.bench", "^BenchmarkDeliver$",
		"-test.benchtime", benchtime, "-test.count", strconv.Itoa(count))
	if err != nil {
		return nil, err
	}
	return parseDeliver(out, count)
}

// parseDeliver reads BenchmarkDeliver/MODE/SIZE lines.
func parseDeliver(out []byte, count int) (*Deliver, error) {
	d := &Deliver{Ns: map[string][]float64{}, Default: rxpath.DefaultCopyThreshold, Count: count}
	all := map[string]map[int][]float64{}
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
		all[name[1]][size] = append(all[name[1]][size], ns)
		if !slices.Contains(d.Sizes, size) {
			d.Sizes = append(d.Sizes, size)
		}
	}
	if len(d.Sizes) == 0 {
		return nil, fmt.Errorf("BenchmarkDeliver: no results\n%s", out)
	}
	slices.Sort(d.Sizes)
	for _, m := range deliverModes {
		for _, s := range d.Sizes {
			d.Ns[m] = append(d.Ns[m], median(all[m][s]))
		}
	}
	for i, s := range d.Sizes {
		if d.Ns["copy"][i] > d.Ns["keep"][i] {
			break
		}
		d.Threshold = s
	}
	return d, nil
}

func writeDeliver(b *strings.Builder, d *Deliver) {
	fmt.Fprintf(b, "\n### Receive delivery: copy or lend (rxpath BenchmarkDeliver), ns per packet, median of %d\n\n", d.Count)
	b.WriteString("copy: copied into the handler's buffer, frame straight back to the Fill ring; keep: lent and kept by " +
		"the handler, which hands the frames back with one PutBatch per batch of 64, the refill taking them from the " +
		"allocator to the Fill ring; keep1: keep with one Put per frame; lend: read in place. Every mode puts each batch's " +
		"frames on a (modelled) Fill ring. ")
	fmt.Fprintf(b, "Copy is not slower than keep up to %d B here; rxpath.DefaultCopyThreshold is %d B.\n\n", d.Threshold, d.Default)
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
		fmt.Fprintf(b, " %.2f |\n", d.Ns["copy"][i]/d.Ns["keep"][i])
	}
}
