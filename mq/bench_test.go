package mq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
)

// BenchmarkQueues receives b.N 64-byte datagrams (in all) over a veth
// pair with 1 and 2 queues: on end B a Sender per queue sends flat out,
// on end A a Poller per queue counts, every queue on its own pinned
// thread. It reports the aggregate rate (Mpps) and what each receiving
// queue's thread spent per packet (rx-cpu-ns/pkt, the mean over the
// queues) and each sending queue's (tx-cpu-ns/pkt). Per-queue cost that
// rises with the queues means shared state. On this 2-CPU VM the sender
// and the receiver threads of a queue share one CPU; see
// docs/multiqueue.md for a many-core host with a real NIC.
func BenchmarkQueues(b *testing.B) {
	for _, queues := range []int{1, 2} {
		b.Run(fmt.Sprintf("queues=%d", queues), func(b *testing.B) {
			bd := newBed(b, queues, 1500)
			ctx, cancel := context.WithTimeout(b.Context(), 60*time.Second)
			defer cancel()
			want := uint64(b.N)
			rxDone := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() {
				rxDone <- bd.rx.Run(ctx, func(q *mq.Queue) rxpath.Handler {
					return rxpath.HandlerFunc(func(p *rxpath.Packet) {
						q.Counters.Packets.Add(1)
					})
				})
			}()
			received := func() uint64 { // atomic loads only, no system call
				var n uint64
				for _, q := range bd.rx.Queues() {
					n += q.Counters.Packets.Load()
				}
				return n
			}
			txErr := bd.tx.Go(ctx, func(ctx context.Context, q *mq.Queue) error {
				s, f := q.Senders[0], bd.flows[q.Index]
				var pl [22]byte
				for ctx.Err() == nil {
					if received() >= want {
						return s.Flush()
					}
					for range 64 {
						if err := s.SendUDP(f, txpath.Options{}, pl[:]); err != nil {
							if errors.Is(err, txpath.ErrRingFull) || errors.Is(err, txpath.ErrNoFrames) {
								_ = s.Wait(ctx)
								break
							}
							return err
						}
						q.Counters.Packets.Add(1)
					}
				}
				return nil
			})
			for ctx.Err() == nil && received() < want {
				time.Sleep(100 * time.Microsecond)
			}
			el := time.Since(start)
			cancel()
			if err := <-rxDone; err != nil {
				b.Fatal(err)
			}
			if txErr != nil {
				b.Fatal(txErr)
			}
			b.StopTimer()
			st := bd.rx.Stats()
			if st.Total.Packets < want {
				b.Fatalf("received %d of %d in %v", st.Total.Packets, want, el)
			}
			var rxNs, txNs float64
			for i, q := range bd.rx.Queues() {
				rxNs += float64(q.CPUTime()) / float64(max(st.Queues[i].Packets, 1))
				tq := bd.tx.Queues()[i]
				txNs += float64(tq.CPUTime()) / float64(max(tq.Counters.Packets.Load(), 1))
			}
			b.ReportMetric(float64(st.Total.Packets)/el.Seconds()/1e6, "Mpps")
			b.ReportMetric(rxNs/float64(queues), "rx-cpu-ns/pkt")
			b.ReportMetric(txNs/float64(queues), "tx-cpu-ns/pkt")
		})
	}
}
