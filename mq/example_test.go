package mq_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/xsk"
)

// Every queue of eth1, each served by its own pinned thread with its own
// UMEM and Poller, counting UDP datagrams to port 9000 until SIGINT.
func Example() {
	set, err := mq.Open(&mq.Config{
		Ifnames: []string{"eth1"},
		Program: &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, IPv6UDP: true, DstPorts: []uint16{9000}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close() // stops every queue and checks that every frame came back
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT)
	defer stop()
	err = set.Run(ctx, func(q *mq.Queue) rxpath.Handler {
		return rxpath.HandlerFunc(func(p *rxpath.Packet) {
			q.Counters.Packets.Add(1) // this queue's own cache lines
			q.Counters.Bytes.Add(uint64(len(p.Data)))
		})
	})
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
	st := set.Stats()
	fmt.Printf("%d packets over %d queues\n", st.Total.Packets, len(st.Queues))
}
