package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Metric is one Prometheus metric: a counter or a gauge read when scraped.
type Metric struct {
	Name, Help string
	// Labels, when set, are the sample's labels without braces
	// (queue="0"); metrics of one name with labels follow one another
	// and share one HELP and TYPE.
	Labels string
	Gauge  bool // a gauge, else a counter
	Value  func() float64
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

// ServeMetrics serves the metrics in the Prometheus text exposition format
// (version 0.0.4) on addr, path /metrics, until ctx ends. It returns the
// address it listens on.
func ServeMetrics(ctx context.Context, addr, prefix string, metrics []Metric) (net.Addr, error) {
	if err := CheckMetricsAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		bw := bufio.NewWriter(w)
		for i, m := range metrics {
			typ := "counter"
			if m.Gauge {
				typ = "gauge"
			}
			name := prefix + "_" + m.Name
			if i == 0 || metrics[i-1].Name != m.Name {
				fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, m.Help, name, typ)
			}
			sample := name
			if m.Labels != "" {
				sample += "{" + m.Labels + "}"
			}
			fmt.Fprintf(bw, "%s %s\n", sample, strconv.FormatFloat(m.Value(), 'g', -1, 64))
		}
		bw.Flush()
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		err := srv.Serve(ln)
		_ = err // http.ErrServerClosed after Shutdown
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			_ = srv.Close()
		}
	})
	return ln.Addr(), nil
}
