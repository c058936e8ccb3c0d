package promxdp_test

import (
	"log"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xdpkit/xdpkit/metrics/promxdp"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// A socket, its poller and its sender, served on /metrics. The sender's
// counters are published by the goroutine that sends.
func Example() {
	u, err := umem.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close()
	sock, err := xsk.New("eth0", 0, u, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	poller, err := rxpath.New(nil, sock)
	if err != nil {
		log.Fatal(err)
	}
	defer poller.Close()
	s, err := txpath.New(sock, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	var (
		mu  sync.Mutex
		pub txpath.Stats // the sending goroutine stores s.Stats() here after each Flush
	)
	c := promxdp.New()
	c.AddSocket(sock)
	c.AddPoller("rx", poller, sock)
	c.AddSender(s, sock, func() txpath.Stats { mu.Lock(); defer mu.Unlock(); return pub })
	c.AddUMEM("main", u)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	log.Fatal(http.ListenAndServe("127.0.0.1:9103", nil))
}
