package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xdpkit/xdpkit/metrics/promxdp"
	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/xsk"
)

// Metric is one of a program's own metrics: a counter or a gauge whose
// value is read when scraped.
type Metric struct {
	Name, Help string
	// Labels are the series' labels; metrics of one name must use the
	// same label names (QueueLabels gives interface and queue).
	Labels prometheus.Labels
	Gauge  bool // a gauge, else a counter
	Value  func() float64
}

// QueueLabels labels a series by interface and queue, with promxdp's
// label names, so that a program's counters join xdpkit's.
func QueueLabels(iface string, queue int) prometheus.Labels {
	return prometheus.Labels{promxdp.LabelInterface: iface, promxdp.LabelQueue: strconv.Itoa(queue)}
}

// QueueLabel labels a series by queue only, for a program's counters that
// span its interfaces (a forwarder's queue serves both).
func QueueLabel(queue int) prometheus.Labels {
	return prometheus.Labels{promxdp.LabelQueue: strconv.Itoa(queue)}
}

// Metrics is a program's Prometheus registry: its own metrics, named
// prefix_name, and xdpkit's (sockets, pollers, senders, UMEMs) through
// promxdp's Collector, plus the Go runtime's and the process's. Everything
// is read on scrape.
type Metrics struct {
	prefix string
	reg    *prometheus.Registry
	xdp    *promxdp.Collector
}

// NewMetrics returns a registry for a program whose own metrics are named
// prefix_name.
func NewMetrics(prefix string) *Metrics {
	m := &Metrics{prefix: prefix, reg: prometheus.NewRegistry(), xdp: promxdp.New()}
	m.reg.MustRegister(m.xdp,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry the metrics are served from.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// XDP is the promxdp Collector the xdpkit counters go through.
func (m *Metrics) XDP() *promxdp.Collector { return m.xdp }

// Add registers a program's own metrics. It fails on a series
// registered twice, or on one whose label names or help differ from
// those of its name's other series.
func (m *Metrics) Add(ms ...Metric) error {
	for _, x := range ms {
		var c prometheus.Collector
		if x.Gauge {
			c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: m.prefix, Name: x.Name, Help: x.Help, ConstLabels: x.Labels}, x.Value)
		} else {
			c = prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: m.prefix, Name: x.Name, Help: x.Help, ConstLabels: x.Labels}, x.Value)
		}
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("metrics: %s_%s %v: %w", m.prefix, x.Name, x.Labels, err)
		}
	}
	return nil
}

// QueueName is the poller and UMEM label value of a queue of a Set.
func QueueName(q *mq.Queue) string { return "queue" + strconv.Itoa(q.ID) }

// AddSet exports every socket of set (XDP_STATISTICS, kicks), its
// pollers and its UMEMs through promxdp, labelled by interface and queue
// (pollers and UMEMs by QueueName). Senders are added one by one with
// AddSender: their counters are published by the goroutine that sends.
func (m *Metrics) AddSet(set *mq.Set) {
	for _, q := range set.Queues() {
		m.xdp.AddUMEM(QueueName(q), q.UMEM)
		for _, s := range q.Sockets {
			m.xdp.AddSocket(s)
		}
		if q.Poller != nil {
			m.xdp.AddPoller(QueueName(q), q.Poller, q.Sockets...)
		}
	}
}

// SenderStats holds a txpath.Sender's counters as the goroutine that
// sends last published them: a Sender's Stats must not be read while it
// sends, a scrape reads these instead.
type SenderStats struct {
	mu sync.Mutex
	st txpath.Stats
}

// Publish stores st; the sending goroutine calls it between batches.
func (p *SenderStats) Publish(st txpath.Stats) {
	p.mu.Lock()
	p.st = st
	p.mu.Unlock()
}

// Load returns the counters last published.
func (p *SenderStats) Load() txpath.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// AddSender exports the counters that pub holds for a Sender on sock,
// labelled by sock's interface and queue.
func (m *Metrics) AddSender(sock *xsk.Socket, pub *SenderStats) {
	m.xdp.AddSender(pub, sock, pub.Load)
}

// CheckMetricsAddr accepts host:port addresses on loopback only
// (127.0.0.0/8, ::1 or localhost); "" means off.
func CheckMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-metrics %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("-metrics %q: bad port", addr)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-metrics %q: only a loopback address (127.0.0.1, [::1], localhost) is allowed", addr)
	}
	return nil
}

// Serve serves the registry with promhttp on addr, path /metrics, until
// ctx ends. It returns the address it listens on.
func (m *Metrics) Serve(ctx context.Context, addr string) (net.Addr, error) {
	if err := CheckMetricsAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		err := srv.Serve(ln)
		_ = err // http.ErrServerClosed after Shutdown
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close() // a scrape still hanging after a second: cut it
		}
	})
	return ln.Addr(), nil
}
