package mq

import (
	"github.com/xdpkit/xdpkit/xsk"
)

// QueueStats are one queue's counters.
type QueueStats struct {
	ID, CPU int
	// Packets, Bytes and Drops are the queue's Counters.
	Packets, Bytes, Drops uint64
	// RXPackets and RXBytes are what the queue's Poller took off its RX
	// rings (0 without a Poller).
	RXPackets, RXBytes uint64
	// XDP are the kernel's counters (XDP_STATISTICS), summed over the
	// queue's sockets.
	XDP xsk.Stats
}

// Stats are per-queue counters and their sums.
type Stats struct {
	Queues []QueueStats
	Total  QueueStats // ID and CPU -1
}

// Stats reads every queue's counters and sums them. It may be called from
// any goroutine, also while Run runs: it reads what each queue published
// and never touches a queue's rings.
func (s *Set) Stats() Stats {
	st := Stats{Queues: make([]QueueStats, len(s.queues)), Total: QueueStats{ID: -1, CPU: -1}}
	for i, q := range s.queues {
		qs := QueueStats{ID: q.ID, CPU: q.CPU,
			Packets: q.Counters.Packets.Load(), Bytes: q.Counters.Bytes.Load(), Drops: q.Counters.Drops.Load()}
		if q.Poller != nil {
			if ps, err := q.Poller.Stats(); err == nil {
				qs.RXPackets, qs.RXBytes = ps.Packets, ps.Bytes
			}
		}
		for _, sk := range q.Sockets {
			if x, err := sk.Stats(); err == nil {
				addXDP(&qs.XDP, x)
			}
		}
		st.Queues[i] = qs
		t := &st.Total
		t.Packets += qs.Packets
		t.Bytes += qs.Bytes
		t.Drops += qs.Drops
		t.RXPackets += qs.RXPackets
		t.RXBytes += qs.RXBytes
		addXDP(&t.XDP, qs.XDP)
	}
	return st
}

func addXDP(dst *xsk.Stats, x xsk.Stats) {
	dst.RXDropped += x.RXDropped
	dst.RXInvalidDescs += x.RXInvalidDescs
	dst.TXInvalidDescs += x.TXInvalidDescs
	dst.RXRingFull += x.RXRingFull
	dst.RXFillRingEmptyDesc += x.RXFillRingEmptyDesc
	dst.TXRingEmptyDescs += x.TXRingEmptyDescs
}
