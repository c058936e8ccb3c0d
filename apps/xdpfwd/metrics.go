package main

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/mq"
)

// serveMetrics serves, with promhttp on addr, xdpfwd's counters labelled
// by queue (a queue forwards between both interfaces) and, through
// promxdp, every socket's kernel counters labelled by interface and
// queue, each queue's poller and UMEM. Everything is read on scrape.
func serveMetrics(ctx context.Context, addr string, set *mq.Set, fwds []*forwarder) (net.Addr, error) {
	m := cli.NewMetrics("xdpfwd")
	m.AddSet(set)
	var ms []cli.Metric
	per := func(name, help string, v func(c *counters) *atomic.Uint64) {
		for i, q := range set.Queues() {
			ctr := v(&fwds[i].c)
			ms = append(ms, cli.Metric{Name: name, Help: help, Labels: cli.QueueLabel(q.ID),
				Value: func() float64 { return float64(ctr.Load()) }})
		}
	}
	per("forwarded_packets_total", "Packets sent on.", func(c *counters) *atomic.Uint64 { return &c.forwarded })
	per("forwarded_bytes_total", "Bytes sent on.", func(c *counters) *atomic.Uint64 { return &c.bytes })
	per("ttl_expired_total", "Packets whose TTL or hop limit expired.", func(c *counters) *atomic.Uint64 { return &c.ttlExpired })
	per("icmp_sent_total", "ICMP time exceeded messages sent.", func(c *counters) *atomic.Uint64 { return &c.icmpSent })
	per("icmp_rate_limited_total", "ICMP time exceeded messages not sent: over -icmp-rate.", func(c *counters) *atomic.Uint64 { return &c.icmpLimited })
	per("no_route_total", "Packets without a route through a served interface.", func(c *counters) *atomic.Uint64 { return &c.noRoute })
	per("no_neighbour_total", "Packets whose next hop has no resolved MAC.", func(c *counters) *atomic.Uint64 { return &c.noNeighbour })
	per("not_routable_total", "Packets to an address that is not forwarded (multicast, link-local, own).", func(c *counters) *atomic.Uint64 { return &c.notRoutable })
	per("not_ip_total", "Frames that are not IPv4 or IPv6.", func(c *counters) *atomic.Uint64 { return &c.notIP })
	per("parse_errors_total", "Frames whose headers do not parse.", func(c *counters) *atomic.Uint64 { return &c.parseErrors })
	per("tx_ring_full_total", "Packets dropped because the TX ring was full.", func(c *counters) *atomic.Uint64 { return &c.txFull })
	per("icmp_not_sent_total", "ICMP errors not built: no source address to send from, a multi-buffer packet, or no frame to build in.", func(c *counters) *atomic.Uint64 { return &c.noRoomICMP })
	per("icmp_tx_ring_full_total", "ICMP errors built but dropped because the TX ring stayed full.", func(c *counters) *atomic.Uint64 { return &c.icmpTXFull })
	per("partial_checksums_finished_total", "UDP/TCP checksums left partial by a sender behind a software device, finished here.", func(c *counters) *atomic.Uint64 { return &c.partialFinished })
	if err := m.Add(ms...); err != nil {
		return nil, err
	}
	return m.Serve(ctx, addr)
}
