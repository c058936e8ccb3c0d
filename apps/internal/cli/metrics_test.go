package cli

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xdpkit/xdpkit/txpath"
)

func TestMetricsAdd(t *testing.T) {
	m := NewMetrics("xk")
	var q0, q1 atomic.Uint64
	q0.Store(3)
	q1.Store(5)
	depth := 7.5
	err := m.Add(
		Metric{Name: "packets_total", Help: "Packets.", Labels: QueueLabels("eth0", 0), Value: func() float64 { return float64(q0.Load()) }},
		Metric{Name: "packets_total", Help: "Packets.", Labels: QueueLabels("eth0", 1), Value: func() float64 { return float64(q1.Load()) }},
		Metric{Name: "depth", Help: "A gauge.", Labels: QueueLabel(1), Gauge: true, Value: func() float64 { return depth }},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP xk_depth A gauge.
# TYPE xk_depth gauge
xk_depth{queue="1"} 7.5
# HELP xk_packets_total Packets.
# TYPE xk_packets_total counter
xk_packets_total{interface="eth0",queue="0"} 3
xk_packets_total{interface="eth0",queue="1"} 5
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "xk_packets_total", "xk_depth"); err != nil {
		t.Error(err)
	}
	// Read on scrape, not when added.
	q1.Add(10)
	want = strings.Replace(want, `queue="1"} 5`, `queue="1"} 15`, 1)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "xk_packets_total", "xk_depth"); err != nil {
		t.Error(err)
	}

	if err := m.Add(Metric{Name: "packets_total", Help: "Packets.", Labels: QueueLabels("eth0", 0), Value: func() float64 { return 0 }}); err == nil {
		t.Error("a series added twice was accepted")
	}
	if err := m.Add(Metric{Name: "packets_total", Help: "Packets.", Labels: QueueLabel(2), Value: func() float64 { return 0 }}); err == nil {
		t.Error("a series with other label names than its family's was accepted")
	}
}

func TestSenderStats(t *testing.T) {
	var p SenderStats
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range uint64(1000) {
			p.Publish(txpath.Stats{Packets: i, Bytes: 64 * i})
		}
	}()
	for range 1000 {
		if st := p.Load(); st.Bytes != 64*st.Packets {
			t.Fatalf("torn read: %+v", st)
		}
	}
	wg.Wait()
	if st := p.Load(); st.Packets != 999 {
		t.Errorf("last published %+v", st)
	}
}

func TestCheckMetricsAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"": true, "127.0.0.1:9101": true, "[::1]:0": true, "localhost:80": true,
		"0.0.0.0:9101": false, "198.18.0.1:80": false, "127.0.0.1": false, "127.0.0.1:x": false,
	} {
		if err := CheckMetricsAddr(addr); (err == nil) != ok {
			t.Errorf("CheckMetricsAddr(%q) = %v", addr, err)
		}
	}
}
