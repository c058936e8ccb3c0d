package apps_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// scrapeExpo GETs /metrics at addr from inside ns (the server listens on
// ns's loopback) and parses the text exposition with expfmt.
func scrapeExpo(t *testing.T, ns *vethns.NS, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	err := ns.Do(func() error {
		// Dialled on Do's thread, so the socket is in ns (net/http's
		// Transport would dial from another goroutine).
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\nAccept: text/plain\r\nConnection: close\r\n\r\n", addr); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /metrics: %s", resp.Status)
		}
		if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeTextPlain {
			return fmt.Errorf("GET /metrics: Content-Type %q, want the text format", resp.Header.Get("Content-Type"))
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err = p.TextToMetricFamilies(resp.Body)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// seriesValue returns the value of the series of family name whose labels
// include want, and whether there is exactly one such series; the family
// must have type typ.
func seriesValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType, want map[string]string) (float64, bool) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Errorf("no metric %s", name)
		return 0, false
	}
	if f.GetType() != typ {
		t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
	}
	var v float64
	n := 0
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, w := range want {
			match = match && got[k] == w
		}
		if !match {
			continue
		}
		n++
		switch typ {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		}
	}
	if n != 1 {
		t.Errorf("%s%v: %d series, want 1", name, want, n)
	}
	return v, n == 1
}

// TestMetricsScrape runs xdpfwd and xdprecv with -metrics, moves traffic
// through them, and scrapes /metrics: their own counters (by queue; by
// interface and queue) and xdpkit's (promxdp: sockets by interface and
// queue, the poller, the UMEM).
func TestMetricsScrape(t *testing.T) {
	b := newBedAs(t, nil, "-metrics", "127.0.0.1:0")
	tp := b.t
	m := regexp.MustCompile(`xdpfwd: metrics on http://(\S+)/metrics`).FindStringSubmatch(b.fwd.Output())
	if m == nil {
		t.Fatalf("xdpfwd did not say where its metrics are:\n%s", b.fwd.Output())
	}
	addr := m[1]

	before := scrapeExpo(t, tp.Fwd, addr)
	if v, _ := seriesValue(t, before, "xdpfwd_forwarded_packets_total", dto.MetricType_COUNTER, map[string]string{"queue": "0"}); v != 0 {
		t.Errorf("forwarded %v before any traffic", v)
	}

	// xdprecv with -metrics too; xdpgen sends n datagrams through.
	recv, err := topo.Start(tp.Recv, path("xdprecv"), nil, "-i", tp.Out.B.Name, "-quiet", "-duration", "60s", "-metrics", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Stop(5 * time.Second)
	if err := recv.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatalf("%v: %s", err, recv.Stderr())
	}
	m = regexp.MustCompile(`xdprecv: metrics on http://(\S+)/metrics`).FindStringSubmatch(recv.Output())
	if m == nil {
		t.Fatalf("xdprecv did not say where its metrics are:\n%s", recv.Output())
	}
	recvAddr := m[1]
	const n = 5000
	if _, stderr, code := runIn(t, tp.Gen, 60*time.Second, "xdpgen", "-i", tp.In.A.Name, "-dst", tp.Out.B.IPv4.Addr().String(),
		"-count", fmt.Sprint(n), "-rate", "20k", "-size", "64", "-quiet"); code != 0 {
		t.Fatalf("xdpgen: exit %d: %s", code, stderr)
	}
	// The last datagrams may still be on their way: scrape until the
	// receiver's count stops moving.
	var got float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		v, _ := seriesValue(t, scrapeExpo(t, tp.Recv, recvAddr), "xdprecv_packets_total", dto.MetricType_COUNTER,
			map[string]string{"interface": tp.Out.B.Name, "queue": "0"})
		if v == n || (v == got && v > 0) {
			break
		}
		got = v
	}
	rfams := scrapeExpo(t, tp.Recv, recvAddr)
	got, _ = seriesValue(t, rfams, "xdprecv_packets_total", dto.MetricType_COUNTER, map[string]string{"interface": tp.Out.B.Name, "queue": "0"})
	seriesValue(t, rfams, "xdpkit_socket_rx_dropped_total", dto.MetricType_COUNTER, map[string]string{"interface": tp.Out.B.Name, "queue": "0"})
	if err := recv.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := recv.Wait(5 * time.Second); err != nil {
		t.Fatalf("xdprecv: %v: %s", err, recv.Stderr())
	}
	var rs recvSummary
	if err := cli.ParseSummary(recv.Output(), &rs); err != nil {
		t.Fatalf("xdprecv: %v: %s", err, recv.Stderr())
	}
	if got == 0 || got != float64(rs.Packets) {
		t.Errorf("xdprecv_packets_total %v, its summary says %d packets (of %d sent)", got, rs.Packets, n)
	}

	fams := scrapeExpo(t, tp.Fwd, addr)
	fwd, _ := seriesValue(t, fams, "xdpfwd_forwarded_packets_total", dto.MetricType_COUNTER, map[string]string{"queue": "0"})
	if fwd == 0 || fwd < float64(rs.Packets) {
		t.Errorf("xdpfwd_forwarded_packets_total %v; the receiver got %d of %d", fwd, rs.Packets, n)
	}
	if v, _ := seriesValue(t, fams, "xdpfwd_forwarded_bytes_total", dto.MetricType_COUNTER, map[string]string{"queue": "0"}); v < 60*fwd {
		t.Errorf("xdpfwd_forwarded_bytes_total %v for %v 64-byte frames", v, fwd)
	}
	// xdpkit's, through promxdp: both sockets of queue 0 by interface.
	for _, ifname := range []string{tp.In.B.Name, tp.Out.A.Name} {
		for _, name := range []string{"xdpkit_socket_rx_dropped_total", "xdpkit_socket_rx_ring_full_total", "xdpkit_socket_tx_kicks_total"} {
			seriesValue(t, fams, name, dto.MetricType_COUNTER, map[string]string{"interface": ifname, "queue": "0"})
		}
	}
	if v, _ := seriesValue(t, fams, "xdpkit_poller_socket_packets_total", dto.MetricType_COUNTER,
		map[string]string{"poller": "queue0", "interface": tp.In.B.Name, "queue": "0"}); v < fwd {
		t.Errorf("poller took %v packets off %s's RX ring; %v were forwarded", v, tp.In.B.Name, fwd)
	}
	if v, _ := seriesValue(t, fams, "xdpkit_poller_packets_total", dto.MetricType_COUNTER, map[string]string{"poller": "queue0"}); v < fwd {
		t.Errorf("xdpkit_poller_packets_total %v < forwarded %v", v, fwd)
	}
	if v, _ := seriesValue(t, fams, "xdpkit_umem_frames_capacity", dto.MetricType_GAUGE, map[string]string{"umem": "queue0"}); v == 0 {
		t.Error("xdpkit_umem_frames_capacity 0")
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
	for name := range fams {
		if !strings.HasPrefix(name, "xdpfwd_") && !strings.HasPrefix(name, "xdpkit_") &&
			!strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("unexpected metric %s", name)
		}
	}

	// The counter is the one the summary reports: nothing moved since.
	fs := b.stopFwd(t)
	b.fwd = nil
	if float64(fs.Forwarded) != fwd {
		t.Errorf("scraped forwarded %v, the summary says %d", fwd, fs.Forwarded)
	}
}
