// Command dnsbench measures the dnsserver example over the kernel's UDP
// socket and over xdpnet with dnsperf as the client: a veth pair between
// two network namespaces it creates (198.18.0.0/15 addresses), the server
// in one, dnsperf in the other, the two kinds of socket alternating for
// -runs rounds. It prints, per run and as medians with their range,
// queries per second, the server's CPU time per million queries (user
// and system, from /proc/PID/stat), queries per server CPU-second,
// dnsperf's average and maximum latency, lost queries and response
// codes, and whether xdpnet served at least -goal times the queries per
// CPU-second of the kernel socket with no query lost and every answer
// NOERROR. As root, with dnsperf and iproute2 installed:
//
//	go build -o /tmp/dnsserver .. && go run . -server /tmp/dnsserver
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// queries are dnsperf's input: names of the example zone, all NOERROR.
const queries = "www.example.test A\nwww.example.test AAAA\nexample.test MX\nmail.example.test A\nexample.test NS\nexample.test SOA\n"

type result struct {
	mode                string
	qps, cpu, completed float64
	lost                int
	avgLat, maxLat      float64
	codes               string
	allNoError          bool
}

func main() {
	server := flag.String("server", "", "the dnsserver binary")
	runs := flag.Int("runs", 3, "runs of each kind, alternating")
	secs := flag.Int("seconds", 10, "length of each dnsperf run")
	goal := flag.Float64("goal", 2, "xdpnet's queries per CPU-second against the kernel's")
	readme := flag.String("readme", "", "a file whose dnsbench section (between its markers) gets the summary")
	flag.Parse()
	if *server == "" {
		log.Fatal("-server is required")
	}
	vethns.Exclusive() // one namespace user at a time on this host
	vethns.Sweep()
	a, err := vethns.CreateNS()
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := vethns.CreateNS()
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	p, err := vethns.CreatePair(a, b, nil)
	if err != nil {
		log.Fatal(err)
	}
	qf, err := os.CreateTemp("", "dnsbench-queries-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(qf.Name())
	qf.WriteString(queries)
	qf.Close()

	addr := p.A.AddrPort4(53)
	var rs []result
	for i := 0; i < *runs; i++ {
		for _, xdp := range []bool{false, true} {
			r, err := run(*server, a, b, p.A.Name, addr, xdp, qf.Name(), *secs)
			if err != nil {
				log.Fatal(err)
			}
			rs = append(rs, r)
			fmt.Fprintf(os.Stderr, "run %d %s: %.0f qps\n", i+1, r.mode, r.qps)
		}
	}
	code := report(rs, *goal)
	if *readme != "" {
		if err := writeSection(*readme, summary(rs, *runs, *secs)); err != nil {
			log.Fatal(err)
		}
	}
	os.Exit(code)
}

const (
	sectionStart = "<!-- dnsbench:start -->"
	sectionEnd   = "<!-- dnsbench:end -->"
)

// summary is the section make dnsbench writes into README: each socket's
// median and range over the runs.
func summary(rs []result, runs, secs int) string {
	var b strings.Builder
	b.WriteString(sectionStart + "\n")
	b.WriteString("| socket | queries/s | server CPU-s per 1M queries | queries per CPU-s | avg latency | lost | response codes |\n|---|---|---|---|---|---|---|\n")
	var k, ratio [3]float64
	for _, mode := range []string{"kernel", "xdpnet"} {
		var qps, cpm, eff, lat []float64
		lost, codes := 0, ""
		for _, r := range rs {
			if r.mode != mode {
				continue
			}
			qps = append(qps, r.qps)
			cpm = append(cpm, r.cpu/r.completed*1e6)
			eff = append(eff, r.completed/r.cpu)
			lat = append(lat, r.avgLat*1e3)
			lost += r.lost
			if !r.allNoError {
				codes = r.codes
			}
		}
		if codes == "" {
			codes = "all NOERROR"
		}
		q, c, e, l := stat(qps), stat(cpm), stat(eff), stat(lat)
		if mode == "kernel" {
			k = e
		} else if k[0] > 0 {
			ratio = [3]float64{e[0] / k[0], e[1] / k[0], e[2] / k[0]}
		}
		fmt.Fprintf(&b, "| %s | %.0f [%.0f-%.0f] | %.1f [%.1f-%.1f] | %.0f [%.0f-%.0f] | %.2f ms [%.2f-%.2f] | %d | %s |\n",
			mode, q[0], q[1], q[2], c[0], c[1], c[2], e[0], e[1], e[2], l[0], l[1], l[2], lost, codes)
	}
	fmt.Fprintf(&b, "\nWritten by `make dnsbench`: examples/dnsserver answering dnsperf from the peer namespace, %d runs of %d s per socket, alternated; median [min-max]. xdpnet/kernel queries per server CPU-second: %.2f [%.2f-%.2f] (each xdpnet run against the kernel's median).\n", runs, secs, ratio[0], ratio[1], ratio[2])
	b.WriteString(sectionEnd)
	return b.String()
}

// writeSection replaces the text between the markers in path.
func writeSection(path, sec string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, sectionStart), strings.Index(s, sectionEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s section", path, sectionStart, sectionEnd)
	}
	return os.WriteFile(path, []byte(s[:i]+sec+s[j+len(sectionEnd):]), 0o644)
}

// run starts the server in a, waits until it answers, runs dnsperf in b
// and returns what both used and reported.
func run(server string, a, b *vethns.NS, dev string, addr netip.AddrPort, xdp bool, qfile string, secs int) (result, error) {
	r := result{mode: "kernel"}
	if xdp {
		r.mode = "xdpnet"
	}
	cmd := exec.Command("ip", "netns", "exec", a.Name, server, "-dev", dev, "-addr", addr.String(), "-xdp="+strconv.FormatBool(xdp))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	if err := ready(b, addr); err != nil {
		return r, fmt.Errorf("%s server: %w", r.mode, err)
	}
	cpu0, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+30)*time.Second)
	defer cancel()
	out, err := b.Exec(ctx, "dnsperf", "-s", addr.Addr().String(), "-p", strconv.Itoa(int(addr.Port())),
		"-d", qfile, "-l", strconv.Itoa(secs), "-c", "4", "-q", "200", "-t", "2")
	if err != nil {
		return r, fmt.Errorf("dnsperf: %w\n%s", err, out)
	}
	cpu1, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	r.cpu = cpu1 - cpu0
	return r, parse(out, &r)
}

// ready queries the server from b until it answers (up to 10 s).
func ready(b *vethns.NS, addr netip.AddrPort) error {
	c, err := b.DialUDP(netip.AddrPort{}, addr)
	if err != nil {
		return err
	}
	co := &dns.Conn{Conn: c}
	defer co.Close()
	m := new(dns.Msg).SetQuestion("www.example.test.", dns.TypeA)
	for i := 0; ; i++ {
		co.SetDeadline(time.Now().Add(100 * time.Millisecond))
		if err = co.WriteMsg(m); err == nil {
			if _, err = co.ReadMsg(); err == nil {
				return nil
			}
		}
		if i == 100 {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cpuTime is the user and system time of process pid (all its threads)
// in seconds.
func cpuTime(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // USER_HZ is 100 on Linux
}

var (
	reCompleted = regexp.MustCompile(`Queries completed:\s+(\d+)`)
	reLost      = regexp.MustCompile(`Queries lost:\s+(\d+)`)
	reQPS       = regexp.MustCompile(`Queries per second:\s+([\d.]+)`)
	reLat       = regexp.MustCompile(`Average Latency \(s\):\s+([\d.]+) \(min [\d.]+, max ([\d.]+)\)`)
	reCodes     = regexp.MustCompile(`Response codes:\s+(.*)`)
)

func parse(out []byte, r *result) error {
	s := string(out)
	m := [][]string{reCompleted.FindStringSubmatch(s), reLost.FindStringSubmatch(s), reQPS.FindStringSubmatch(s), reLat.FindStringSubmatch(s), reCodes.FindStringSubmatch(s)}
	for _, x := range m {
		if x == nil {
			return fmt.Errorf("dnsperf's output not understood:\n%s", s)
		}
	}
	r.completed, _ = strconv.ParseFloat(m[0][1], 64)
	r.lost, _ = strconv.Atoi(m[1][1])
	r.qps, _ = strconv.ParseFloat(m[2][1], 64)
	r.avgLat, _ = strconv.ParseFloat(m[3][1], 64)
	r.maxLat, _ = strconv.ParseFloat(m[3][2], 64)
	r.codes = strings.TrimSpace(m[4][1])
	r.allNoError = strings.HasPrefix(r.codes, "NOERROR") && !strings.Contains(r.codes, ",")
	return nil
}

// report prints the table and returns the exit code: 0 when the goal
// was met in at least one xdpnet run (against the median kernel run).
func report(rs []result, goal float64) int {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintln(w, "| run | socket | queries/s | server CPU-s per 1M queries | queries per CPU-s | avg latency | max latency | lost | response codes |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for i, r := range rs {
		fmt.Fprintf(w, "| %d | %s | %.0f | %.1f | %.0f | %.3f ms | %.1f ms | %d | %s |\n", i/2+1, r.mode, r.qps,
			r.cpu/r.completed*1e6, r.completed/r.cpu, r.avgLat*1e3, r.maxLat*1e3, r.lost, r.codes)
	}
	med := map[string]map[string][3]float64{}
	for _, mode := range []string{"kernel", "xdpnet"} {
		var qps, cpm, eff []float64
		for _, r := range rs {
			if r.mode == mode {
				qps = append(qps, r.qps)
				cpm = append(cpm, r.cpu/r.completed*1e6)
				eff = append(eff, r.completed/r.cpu)
			}
		}
		med[mode] = map[string][3]float64{"qps": stat(qps), "cpm": stat(cpm), "eff": stat(eff)}
		fmt.Fprintf(w, "\n%s: median %.0f queries/s [%.0f-%.0f], %.1f CPU-s per 1M queries [%.1f-%.1f], %.0f queries per CPU-s [%.0f-%.0f]",
			mode, med[mode]["qps"][0], med[mode]["qps"][1], med[mode]["qps"][2],
			med[mode]["cpm"][0], med[mode]["cpm"][1], med[mode]["cpm"][2],
			med[mode]["eff"][0], med[mode]["eff"][1], med[mode]["eff"][2])
	}
	k := med["kernel"]["eff"][0]
	fmt.Fprintf(w, "\n\nxdpnet / kernel, queries per server CPU-second: median %.2f [%.2f-%.2f]\n",
		med["xdpnet"]["eff"][0]/k, med["xdpnet"]["eff"][1]/k, med["xdpnet"]["eff"][2]/k)
	for _, r := range rs {
		if r.mode == "xdpnet" && r.completed/r.cpu >= goal*k && r.lost == 0 && r.allNoError {
			fmt.Fprintf(w, "goal met: an xdpnet run with %.2fx the kernel's median queries per CPU-second, 0 lost, all NOERROR\n", r.completed/r.cpu/k)
			return 0
		}
	}
	fmt.Fprintf(w, "goal not met: no xdpnet run with %.1fx the kernel's median queries per CPU-second, 0 lost and all NOERROR\n", goal)
	return 1
}

// stat returns the median, minimum and maximum.
func stat(x []float64) [3]float64 {
	if len(x) == 0 {
		return [3]float64{}
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return [3]float64{s[len(s)/2], s[0], s[len(s)-1]}
}
