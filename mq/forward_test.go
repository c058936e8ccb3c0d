package mq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/xsk"
)

// relay is one queue of a two-interface Set forwarding without a copy: it
// keeps each received frame and puts its descriptor on the TX ring of the
// queue's other socket, which shares the queue's UMEM.
type relay struct {
	q    *mq.Queue
	pend []xsk.Desc
	comp []uint64
}

func (r *relay) Receive(p *rxpath.Packet) {
	r.pend = p.Keep(r.pend)
	if len(r.pend) >= 64 {
		r.EndRound()
	}
}

// EndRound submits the pending frames; completions are reaped before
// each submission, so at any time some frames are on the TX and
// Completion rings for Close to collect.
func (r *relay) EndRound() {
	out := r.q.Sockets[1]
	for {
		n := out.Completion().Consume(r.comp)
		if n == 0 {
			break
		}
		_ = r.q.UMEM.PutBatch(r.comp[:n])
	}
	n := out.TX().Produce(r.pend)
	for _, d := range r.pend[n:] {
		_ = r.q.UMEM.Put(d.Addr) // ring full: dropped
	}
	r.q.Counters.Packets.Add(uint64(n))
	r.pend = r.pend[:0]
	_ = out.KickTX()
}

// TestForwardSetClose: a Set over two interfaces forwards queue i of one
// to queue i of the other through the queue's shared UMEM, and Close in
// the middle of the traffic gets every frame back (from the Fill, RX, TX
// and Completion rings) and leaves nothing attached.
func TestForwardSetClose(t *testing.T) {
	vethns.Require(t)
	const queues = 2
	gns, fns, rns := vethns.NewNS(t), vethns.NewNS(t), vethns.NewNS(t)
	in := vethns.NewPair(t, gns, fns, &vethns.PairConfig{Queues: queues})
	out := vethns.NewPair(t, fns, rns, &vethns.PairConfig{Queues: queues})
	open := func(ns *vethns.NS, c *mq.Config) *mq.Set {
		t.Helper()
		var s *mq.Set
		if err := ns.Do(func() (err error) { s, err = mq.Open(c); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	filter := &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{port}}}
	gen := open(gns, &mq.Config{Ifnames: []string{in.A.Name}, Socket: xsk.Config{NoRX: true}, NoProgram: true, NoPoller: true,
		Sender: &txpath.Config{Policy: txpath.Software}})
	fwd := open(fns, &mq.Config{Ifnames: []string{in.B.Name, out.A.Name}, Program: filter,
		Poller: rxpath.Config{CopyThreshold: -1, FillFrames: 1024}})
	recv := open(rns, &mq.Config{Ifnames: []string{out.B.Name}, Socket: xsk.Config{NoTX: true}, Program: filter})
	for _, q := range fwd.Queues() {
		if q.Sockets[0].UMEM() != q.UMEM || q.Sockets[1].UMEM() != q.UMEM {
			t.Fatalf("queue %d: the two interfaces' sockets do not share the queue's UMEM", q.ID)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	recvDone := make(chan error, 1)
	go func() {
		recvDone <- recv.Run(ctx, func(q *mq.Queue) rxpath.Handler {
			return rxpath.HandlerFunc(func(*rxpath.Packet) { q.Counters.Packets.Add(1) })
		})
	}()
	fwdDone := make(chan error, 1)
	go func() {
		fwdDone <- fwd.Run(ctx, func(q *mq.Queue) rxpath.Handler {
			return &relay{q: q, pend: make([]xsk.Desc, 0, 128), comp: make([]uint64, 256)}
		})
	}()
	waitRunning(t, recv)
	waitRunning(t, fwd)
	genDone := make(chan error, 1)
	go func() {
		genDone <- gen.Go(ctx, func(ctx context.Context, q *mq.Queue) error {
			f, err := txpath.NewUDPFlow(in.A.MAC, in.B.MAC, in.A.AddrPort4(uint16(40000+q.ID)), out.B.AddrPort4(port), nil)
			if err != nil {
				return err
			}
			s := q.Senders[0]
			var pl [100]byte
			for ctx.Err() == nil {
				if err := s.SendUDP(f, txpath.Options{}, pl[:]); errors.Is(err, txpath.ErrRingFull) || errors.Is(err, txpath.ErrNoFrames) {
					_ = s.Wait(ctx)
				} else if err != nil {
					return err
				}
			}
			return nil
		})
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st := recv.Stats(); st.Queues[0].Packets > 5000 && st.Queues[1].Packets > 5000 {
			break
		}
	}
	for i, qs := range fwd.Stats().Queues {
		if r := recv.Stats().Queues[i]; qs.Packets == 0 || r.Packets == 0 {
			t.Errorf("queue %d: forwarded %d, received %d before Close", qs.ID, qs.Packets, r.Packets)
		}
	}
	// Close the forwarder while the generator still sends and its queues
	// hold frames on every ring.
	if err := fwd.Close(); err != nil {
		t.Errorf("forwarder Close under traffic: %v", err)
	}
	if err := <-fwdDone; err != nil {
		t.Errorf("forwarder Run: %v", err)
	}
	cancel()
	for _, ch := range []chan error{genDone, recvDone} {
		if err := <-ch; err != nil {
			t.Error(err)
		}
	}
}
