package apps_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// latencySummary is the part of xdprecv's summary the latency test reads.
type latencySummary struct {
	Valid      uint64
	XDPDropped uint64
	Latency    *struct {
		Clock                         string
		Samples                       int64
		P50Us, P99Us, P999Us, MaxUs   float64
		FromDevice, FromXDP, FromUser uint64
		Negative, NoClock             uint64
	}
}

// scrape fetches /metrics from addr inside ns: the dial runs on Do's
// thread, so it is made in ns (http.Client would dial from another
// goroutine, in another namespace).
func scrape(t *testing.T, ns *vethns.NS, addr string) string {
	t.Helper()
	var body string
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
			return err
		}
		b, err := io.ReadAll(bufio.NewReader(c))
		body = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return body
}

// metricValue finds the sample "name{labels} value" (or "name value") in an
// exposition.
func metricValue(expo, sample string) (float64, bool) {
	for _, line := range strings.Split(expo, "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestLatency: xdpgen -timestamp -> xdprecv -latency over a veth pair.
// Every stamped datagram gets a latency from the XDP program's receive
// time (RX metadata, native attach on veth; veth has no device
// timestamp), and the summary and the metrics carry p50 <= p99 <= p99.9
// <= max, all above zero and below the time the test took.
func TestLatency(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	pair := vethns.NewPair(t, a, b, nil)
	const n = 3000
	const metricsAddr = "127.0.0.1:9103"
	began := time.Now()
	recv, err := topo.Start(a, path("xdprecv"), nil, "-i", pair.A.Name, "-latency", "-xdp-mode", "native",
		"-metrics", metricsAddr, "-quiet", "-duration", "60s")
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Stop(5 * time.Second)
	if err := recv.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatalf("%v: %s", err, recv.Stderr())
	}
	stdout, stderr, code := runIn(t, b, 60*time.Second, "xdpgen", "-i", pair.B.Name, "-dst", pair.A.IPv4.Addr().String(),
		"-dst-mac", pair.A.MAC.String(), "-count", fmt.Sprint(n), "-rate", "20k", "-flows", "4", "-timestamp", "-quiet")
	if code != 0 {
		t.Fatalf("xdpgen: exit %d: %s%s", code, stdout, stderr)
	}
	var expo string
	for deadline := time.Now().Add(5 * time.Second); ; {
		expo = scrape(t, a, metricsAddr)
		if v, _ := metricValue(expo, "xdprecv_latency_samples_total"); v >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := recv.Stop(5 * time.Second); err != nil {
		t.Errorf("xdprecv: %v: %s", err, recv.Stderr())
	}
	took := time.Since(began)
	out := recv.Output()
	t.Logf("xdprecv:\n%s", out)
	var rs latencySummary
	if err := cli.ParseSummary(out, &rs); err != nil {
		t.Fatalf("xdprecv: %v: %s", err, recv.Stderr())
	}
	l := rs.Latency
	if l == nil {
		t.Fatal("no latency in the summary")
	}
	// The library loads the program with the RX metadata kfuncs where the
	// kernel has them, and says why not where it falls back to the XDP
	// hook's time: that reason must be the kernel lacking them (its BTF
	// has no such kfunc), nothing else.
	var noKfuncs string
	if !strings.Contains(out, "RX metadata kfuncs") {
		m := regexp.MustCompile(`RX metadata xdp-time \(not more: (kfunc bpf_xdp_metadata_rx_\w+: not found)`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("the ready line says neither that the program got the RX metadata kfuncs nor that the kernel lacks them")
		} else {
			noKfuncs = m[1]
		}
	}
	// Every valid datagram is stamped and timed by the XDP clock. A
	// datagram may be lost only where the kernel counts it: the socket's
	// XDP_STATISTICS or veth's drops (its 256-entry XDP ring on a busy
	// machine).
	vethDrops := linkDrops(t, pair.A, pair.B)
	if rs.Valid+rs.XDPDropped+vethDrops < n || rs.Valid == 0 {
		t.Errorf("valid %d of %d, with %d socket and %d veth drops: a loss no kernel counter explains", rs.Valid, n, rs.XDPDropped, vethDrops)
	}
	if uint64(l.Samples) != rs.Valid || l.FromXDP != rs.Valid || l.FromUser != 0 || l.FromDevice != 0 || l.Negative != 0 || l.NoClock != 0 {
		t.Errorf("valid %d; latency %+v; want every valid datagram timed by the XDP clock", rs.Valid, *l)
	}
	maxUs := float64(took.Microseconds())
	if !(l.P50Us > 0 && l.P50Us <= l.P99Us && l.P99Us <= l.P999Us && l.P999Us <= l.MaxUs && l.MaxUs < maxUs) {
		t.Errorf("percentiles p50 %v, p99 %v, p99.9 %v, max %v us: want 0 < p50 <= p99 <= p99.9 <= max < %v us", l.P50Us, l.P99Us, l.P999Us, l.MaxUs, maxUs)
	}
	var q [4]float64
	for i, label := range []string{"0.5", "0.99", "0.999", "1"} {
		v, ok := metricValue(expo, fmt.Sprintf("xdprecv_latency_seconds{quantile=%q}", label))
		if !ok {
			t.Fatalf("metrics have no latency quantile %s:\n%s", label, expo)
		}
		q[i] = v
	}
	if !(q[0] > 0 && q[0] <= q[1] && q[1] <= q[2] && q[2] <= q[3] && q[3] < took.Seconds()) {
		t.Errorf("metric quantiles %v: want 0 < p50 <= p99 <= p99.9 <= max < %v s", q, took.Seconds())
	}
	if v, _ := metricValue(expo, "xdprecv_latency_samples_total"); v != float64(rs.Valid) {
		t.Errorf("xdprecv_latency_samples_total %v, want the summary's %d", v, rs.Valid)
	}
	if noKfuncs != "" {
		vethns.NotApplicable(t, "RX metadata kfuncs", "the program fell back to the XDP hook's time (checked above): "+noKfuncs)
	}
}
