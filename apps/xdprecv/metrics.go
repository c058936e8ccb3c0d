package main

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/mq"
)

// serveMetrics serves, with promhttp on addr, xdprecv's counters labelled
// by interface and queue, extra, and, through promxdp, every socket's
// kernel counters, each queue's poller and UMEM. Everything is read on
// scrape.
func serveMetrics(ctx context.Context, addr, iface string, set *mq.Set, rs []*receiver, extra ...cli.Metric) (net.Addr, error) {
	m := cli.NewMetrics("xdprecv")
	m.AddSet(set)
	var ms []cli.Metric
	ctr := func(name, help string, v func(r *receiver) *atomic.Uint64) {
		for i, q := range set.Queues() {
			n := v(rs[i])
			ms = append(ms, cli.Metric{Name: name, Help: help, Labels: cli.QueueLabels(iface, q.ID),
				Value: func() float64 { return float64(n.Load()) }})
		}
	}
	ctr("packets_total", "Packets received.", func(r *receiver) *atomic.Uint64 { return &r.packets })
	ctr("bytes_total", "Bytes received.", func(r *receiver) *atomic.Uint64 { return &r.bytes })
	ctr("valid_total", "Generator packets with good checksums and payload.", func(r *receiver) *atomic.Uint64 { return &r.valid })
	ctr("gaps_total", "Sequence numbers skipped.", func(r *receiver) *atomic.Uint64 { return &r.gaps })
	ctr("late_total", "Packets that arrived after a later one of their flow.", func(r *receiver) *atomic.Uint64 { return &r.late })
	ctr("duplicates_total", "Late packets whose sequence number had already arrived.", func(r *receiver) *atomic.Uint64 { return &r.dups })
	ctr("bad_checksum_total", "Packets with a bad IPv4 header or UDP checksum.", func(r *receiver) *atomic.Uint64 { return &r.badUDP })
	ctr("partial_checksum_total", "Packets whose UDP checksum field holds the unfinished pseudo-header sum.", func(r *receiver) *atomic.Uint64 { return &r.partialUDP })
	ctr("bad_payload_total", "Generator packets with a wrong pattern or size.", func(r *receiver) *atomic.Uint64 { return &r.badData })
	if err := m.Add(append(ms, extra...)...); err != nil {
		return nil, err
	}
	return m.Serve(ctx, addr)
}
