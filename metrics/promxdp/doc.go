// Package promxdp exports xdpkit's counters to Prometheus: a
// prometheus.Collector (client_golang) for AF_XDP sockets (the kernel's
// XDP_STATISTICS and the socket's kick counts), rxpath pollers, txpath
// senders and UMEM frame accounting, labelled by interface and queue.
// Register it in your own registry:
//
//	c := promxdp.New()
//	c.AddSocket(sock)
//	c.AddPoller("rx", poller, sock)
//	c.AddUMEM("main", u)
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(c)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Everything is read on scrape, from the scraping goroutine: the packet
// path pays nothing for it. A socket's XDP_STATISTICS costs one
// getsockopt per socket per scrape; the poller's counters are those it
// published at the end of its last round.
//
// It is a module of its own so that client_golang stays out of the
// xdpkit library's go.mod.
package promxdp
