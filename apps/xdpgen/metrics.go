package main

import (
	"context"
	"net"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/mq"
)

// serveMetrics serves, with promhttp on addr, xdpgen's counters labelled
// by interface and queue and, through promxdp, every socket's kernel
// counters, each queue's UMEM and Sender (the counters its goroutine
// publishes after each burst). Everything is read on scrape.
func serveMetrics(ctx context.Context, addr, iface string, set *mq.Set, gens []*gen) (net.Addr, error) {
	m := cli.NewMetrics("xdpgen")
	m.AddSet(set)
	var ms []cli.Metric
	for i, q := range set.Queues() {
		gens[i].pub = &cli.SenderStats{}
		m.AddSender(q.Sockets[0], gens[i].pub)
		ctr := q.Counters
		ms = append(ms,
			cli.Metric{Name: "sent_packets_total", Help: "Packets queued for sending.", Labels: cli.QueueLabels(iface, q.ID),
				Value: func() float64 { return float64(ctr.Packets.Load()) }},
			cli.Metric{Name: "sent_bytes_total", Help: "Bytes queued for sending.", Labels: cli.QueueLabels(iface, q.ID),
				Value: func() float64 { return float64(ctr.Bytes.Load()) }})
	}
	if err := m.Add(ms...); err != nil {
		return nil, err
	}
	return m.Serve(ctx, addr)
}
