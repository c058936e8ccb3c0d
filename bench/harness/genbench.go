package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// GenCase is one xdpgen mode sent flat out into a veth peer (TX only),
// counted by the harness's XDP counter on the peer (-only gen).
type GenCase struct {
	Name    string   `json:"name"`
	Args    []string `json:"args"` // xdpgen's mode flags
	Size    int      `json:"size"` // frame bytes
	Counted string   `json:"counted_at"`
	Runs    []GenRun `json:"runs"`
	Median  float64  `json:"median_mpps"`
}

// GenRun is one run: frames the peer counted, xdpgen's summary (its
// sent count and sending time), and their ratio.
type GenRun struct {
	Frames  uint64          `json:"frames"`
	Sent    uint64          `json:"sent"`
	Seconds float64         `json:"seconds"`
	Mpps    float64         `json:"mpps"`
	Loss    float64         `json:"loss"`
	Raw     json.RawMessage `json:"raw"`
}

// genCases are the xdpgen rows, one per mode: plain UDP (txpath's
// UDPFlow path), TCP SYNs from the field engine over a random source
// port, ICMP echo requests, raw frames of the default EtherType, and pcap
// replay of a file of 64-byte frames looped.
func genCases(pcapFile string) []GenCase {
	return []GenCase{
		{Name: "udp 64 B", Args: []string{"-mode", "udp", "-size", "64"}, Size: 64},
		{Name: "tcp-syn 74 B", Args: []string{"-mode", "tcp-syn", "-sport", "1024-65535", "-order", "random"}, Size: 74},
		{Name: "icmp-echo 64 B", Args: []string{"-mode", "icmp-echo", "-size", "64"}, Size: 64},
		{Name: "raw 64 B", Args: []string{"-mode", "raw", "-size", "64"}, Size: 64},
		{Name: "pcap 64 B", Args: []string{"-mode", "pcap", "-pcap", pcapFile, "-loop", "0"}, Size: 64},
	}
}

// runGen builds xdpgen and measures each case c.runs times for
// c.seconds, pinned to the measuring CPU.
func runGen(ctx context.Context, c *config, bin string) (_ []GenCase, err error) {
	vethns.Sweep()
	gen, err := buildXdpgen(ctx, c, bin)
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
	b, err := newNS(&cl)
	if err != nil {
		return nil, err
	}
	p, err := newPair(&cl, a, b)
	if err != nil {
		return nil, err
	}
	cnt, err := newCounter(p.B.NS, p.B.Name)
	if err != nil {
		return nil, err
	}
	cl.add(cnt.Close)
	pcapFile := filepath.Join(bin, "gen64.pcap")
	if err := writeGenPcap(pcapFile, p); err != nil {
		return nil, err
	}
	meas := -1
	if c.pin {
		meas = c.measCPU
	}
	cases := genCases(pcapFile)
	for i := range cases {
		gc := &cases[i]
		gc.Counted = "sink: the harness's XDP counter on the peer"
		var mpps []float64
		for r := 0; r < c.runs; r++ {
			run, err := genOnce(ctx, gen, p, cnt, gc.Args, c.seconds, meas)
			if err != nil {
				return cases[:i], fmt.Errorf("xdpgen %s run %d: %w", gc.Name, r, err)
			}
			gc.Runs = append(gc.Runs, run)
			mpps = append(mpps, run.Mpps)
			logf("  xdpgen %-14s run %d: %.3f Mpps counted (sent %d, loss %.2f%%)", gc.Name, r, run.Mpps, run.Sent, 100*run.Loss)
		}
		gc.Median = median(mpps)
		for k, a := range gc.Args {
			if a == pcapFile {
				gc.Args[k] = filepath.Base(a) // the report's; the file is the harness's
			}
		}
		logf("xdpgen %s: %.3f Mpps (median of %d)", gc.Name, gc.Median, c.runs)
	}
	return cases, nil
}

// genOnce runs xdpgen once for secs seconds and counts its frames at
// the peer.
func genOnce(ctx context.Context, gen string, p *vethns.Pair, cnt *counter, mode []string, secs, cpu int) (GenRun, error) {
	var run GenRun
	args := append([]string{"-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(), "-dst-mac", p.B.MAC.String(),
		"-rate", "max", "-duration", strconv.Itoa(secs) + "s", "-quiet"}, mode...)
	argv := append([]string{"netns", "exec", p.A.NS.Name, gen}, args...)
	name := "ip"
	if cpu >= 0 {
		argv = append([]string{"-c", strconv.Itoa(cpu), "ip"}, argv...)
		name = "taskset"
	}
	n0, err := cnt.total()
	if err != nil {
		return run, err
	}
	ctx, cancel := context.WithTimeout(ctx, procTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return run, fmt.Errorf("xdpgen %s: %w\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	var sum struct {
		Sent    uint64
		Seconds float64
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "summary "); ok {
			run.Raw = json.RawMessage(rest)
			err = json.Unmarshal(run.Raw, &sum)
		}
	}
	if run.Raw == nil || err != nil {
		return run, errors.Join(errors.New("xdpgen printed no summary"), err)
	}
	// Frames may still be in the peer's queue: wait for the count.
	n1, err := settle(cnt.total, n0, sum.Sent, 500*time.Millisecond, 10*time.Second)
	if err != nil {
		return run, err
	}
	run.Frames, run.Sent, run.Seconds = n1-n0, sum.Sent, sum.Seconds
	if run.Seconds > 0 {
		run.Mpps = float64(run.Frames) / run.Seconds / 1e6
	}
	if run.Sent > 0 {
		run.Loss = 1 - float64(run.Frames)/float64(run.Sent)
	}
	return run, nil
}

// settle reads total until it has counted want frames since n0, or has
// not changed for quiet (the rest is lost), or limit has passed, and
// returns its last reading.
func settle(total func() (uint64, error), n0, want uint64, quiet, limit time.Duration) (uint64, error) {
	end := time.Now().Add(limit)
	last, err := total()
	changed := time.Now()
	for err == nil && last-n0 < want && time.Since(changed) < quiet && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
		var n uint64
		if n, err = total(); n != last {
			last, changed = n, time.Now()
		}
	}
	return last, err
}

// writeGenPcap writes 1000 64-byte UDP frames from p.A to p.B into a
// pcap file (microsecond timestamps, 1 µs apart).
func writeGenPcap(path string, p *vethns.Pair) error {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write(le.AppendUint32(nil, 0xa1b2c3d4))
	b.Write(le.AppendUint16(le.AppendUint16(nil, 2), 4))
	b.Write(make([]byte, 8))
	b.Write(le.AppendUint32(le.AppendUint32(nil, 65535), 1))
	src, dst := p.A.IPv4.Addr().As4(), p.B.IPv4.Addr().As4()
	f := make([]byte, 64)
	for i := range 1000 {
		copy(f[0:], p.B.MAC)
		copy(f[6:], p.A.MAC)
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := f[14:34]
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], 50)
		copy(ip[12:], src[:])
		copy(ip[16:], dst[:])
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], csum.IPv4Header(ip))
		binary.BigEndian.PutUint16(f[34:], uint16(10000+i%100))
		binary.BigEndian.PutUint16(f[36:], 9000)
		binary.BigEndian.PutUint16(f[38:], 30) // UDP length; checksum 0: none
		b.Write(le.AppendUint32(le.AppendUint32(nil, 0), uint32(i)))
		b.Write(le.AppendUint32(le.AppendUint32(nil, 64), 64))
		b.Write(f)
	}
	return os.WriteFile(path, b.Bytes(), 0o600)
}

// writeGen is the xdpgen section of the summary.
func writeGen(b *strings.Builder, cs []GenCase) {
	b.WriteString("\n### xdpgen by mode: TX only into a veth peer, flat out, Mpps counted at the peer (median of the runs)\n\n")
	b.WriteString("| mode | xdpgen flags | frame | Mpps | runs (Mpps) | loss |\n|---|---|---:|---:|---|---:|\n")
	for _, c := range cs {
		var runs []string
		loss := 0.0
		for _, r := range c.Runs {
			runs = append(runs, fmt.Sprintf("%.3f", r.Mpps))
			loss = max(loss, r.Loss)
		}
		fmt.Fprintf(b, "| %s | `%s` | %d B | %.3f | %s | %.2f%% |\n", c.Name, strings.Join(c.Args, " "), c.Size, c.Median,
			strings.Join(runs, ", "), 100*loss)
	}
}

// buildXdpgen builds apps/xdpgen into dir and returns its path.
func buildXdpgen(ctx context.Context, c *config, dir string) (string, error) {
	gen := filepath.Join(dir, "xdpgen")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", gen, "./xdpgen")
	cmd.Dir = filepath.Join(c.repo, "apps")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build xdpgen: %w\n%s", err, b)
	}
	return gen, nil
}
