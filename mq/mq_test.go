package mq_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/mq"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/xsk"
)

func TestMain(m *testing.M) {
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

const port = 7777

// bed is a multi-queue veth pair: a receiving Set on end A (a poller per
// queue behind the XDP program), a sending Set on end B (a Sender per
// queue, no program, no RX).
type bed struct {
	a, b   *vethns.NS
	pair   *vethns.Pair
	rx, tx *mq.Set
	flows  []*txpath.UDPFlow // per sending queue
}

// newBed ends the test as not applicable where the kernel lacks
// multi-buffer (mtu above 3000) and the library says so.
func newBed(t testing.TB, queues, mtu int) *bed {
	t.Helper()
	vethns.Require(t)
	b := &bed{a: vethns.NewNS(t), b: vethns.NewNS(t)}
	b.pair = vethns.NewPair(t, b.a, b.b, &vethns.PairConfig{Queues: queues, MTU: mtu})
	mb := mtu > 3000
	err := b.a.Do(func() error {
		var err error
		b.rx, err = mq.Open(&mq.Config{
			Ifnames: []string{b.pair.A.Name},
			Socket:  xsk.Config{MultiBuffer: mb, NoTX: true},
			Program: &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{port}}},
			Poller:  rxpath.Config{CopyThreshold: -1},
		})
		return err
	})
	if mb && errors.Is(err, xsk.ErrNotSupported) {
		vethns.NotApplicable(t, "AF_XDP multi-buffer", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.rx.Close(); err != nil {
			t.Errorf("receiver Close: %v", err)
		}
	})
	err = b.b.Do(func() error {
		var err error
		b.tx, err = mq.Open(&mq.Config{
			Ifnames:   []string{b.pair.B.Name},
			Socket:    xsk.Config{MultiBuffer: mb, NoRX: true},
			NoProgram: true,
			NoPoller:  true,
			Sender:    &txpath.Config{Policy: txpath.Software},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.tx.Close(); err != nil {
			t.Errorf("sender Close: %v", err)
		}
	})
	if len(b.rx.Queues()) != queues || len(b.tx.Queues()) != queues {
		t.Fatalf("%d and %d queues, want %d", len(b.rx.Queues()), len(b.tx.Queues()), queues)
	}
	for _, s := range []*mq.Set{b.rx, b.tx} {
		for _, q := range s.Queues() {
			for _, sk := range q.Sockets {
				if sk.Queue() != q.ID {
					t.Fatalf("queue %d has a socket bound to queue %d of %s", q.ID, sk.Queue(), sk.Ifname())
				}
			}
		}
	}
	for _, q := range b.tx.Queues() {
		// The source port names the sending queue.
		f, err := txpath.NewUDPFlow(b.pair.B.MAC, b.pair.A.MAC, b.pair.B.AddrPort4(uint16(40000+q.ID)), b.pair.A.AddrPort4(port), nil)
		if err != nil {
			t.Fatal(err)
		}
		b.flows = append(b.flows, f)
	}
	return b
}

// payload is datagram seq of queue q: queue, sequence, then a pattern.
func payload(buf []byte, q, seq, size int) []byte {
	n := 8 + (seq*131+q*17)%(size-7)
	p := buf[:n]
	binary.BigEndian.PutUint32(p, uint32(q))
	binary.BigEndian.PutUint32(p[4:], uint32(seq))
	for i := 8; i < n; i++ {
		p[i] = byte(seq*7 + q*13 + i)
	}
	return p
}

// checker is one receiving queue's handler: it checks that every
// datagram came from the sending queue with the same id, byte-exact, once.
type checker struct {
	q      *mq.Queue
	size   int
	seen   []bool
	buf    []byte
	flat   []byte
	errs   *atomic.Value
	wrongQ atomic.Uint64
}

func (c *checker) Receive(p *rxpath.Packet) {
	c.flat = c.flat[:0]
	for _, s := range p.Segments {
		c.flat = append(c.flat, s...)
	}
	f := c.flat
	if len(f) < 42+8 || binary.BigEndian.Uint16(f[36:]) != port {
		c.fail(fmt.Errorf("queue %d: not a test datagram (%d bytes)", c.q.ID, len(f)))
		return
	}
	pl := f[42:]
	from, seq := int(binary.BigEndian.Uint32(pl)), int(binary.BigEndian.Uint32(pl[4:]))
	if from != c.q.ID || int(binary.BigEndian.Uint16(f[34:]))-40000 != from {
		c.wrongQ.Add(1)
		c.fail(fmt.Errorf("queue %d: datagram %d sent on queue %d", c.q.ID, seq, from))
		return
	}
	if seq >= len(c.seen) || c.seen[seq] {
		c.fail(fmt.Errorf("queue %d: datagram %d twice or out of range", c.q.ID, seq))
		return
	}
	if want := payload(c.buf, from, seq, c.size); !bytes.Equal(pl, want) {
		c.fail(fmt.Errorf("queue %d: datagram %d: %d bytes differ from the %d sent", c.q.ID, seq, len(pl), len(want)))
		return
	}
	c.seen[seq] = true
	c.q.Counters.Packets.Add(1)
	c.q.Counters.Bytes.Add(uint64(len(pl)))
}

func (c *checker) fail(err error) {
	c.q.Counters.Drops.Add(1)
	c.errs.CompareAndSwap(nil, err)
}

// traffic runs the receiving Set with checkers, sends count datagrams
// (payloads up to size bytes) from every sending queue with at most
// window unreceived per queue, and waits until all arrived or limit. It
// returns the checkers after the receivers stopped.
func (b *bed) traffic(t *testing.T, count, size, window int, limit time.Duration, during func()) []*checker {
	t.Helper()
	var errs atomic.Value
	checkers := make([]*checker, len(b.rx.Queues()))
	for i, q := range b.rx.Queues() {
		checkers[i] = &checker{q: q, size: size, seen: make([]bool, count), buf: make([]byte, size), flat: make([]byte, 0, size+64), errs: &errs}
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	rxDone := make(chan error, 1)
	go func() { rxDone <- b.rx.Run(ctx, func(q *mq.Queue) rxpath.Handler { return checkers[q.Index] }) }()
	waitRunning(t, b.rx)
	txDone := make(chan error, 1)
	go func() {
		txDone <- b.tx.Go(ctx, func(ctx context.Context, q *mq.Queue) error {
			s, f, got := q.Senders[0], b.flows[q.Index], &b.rx.Queues()[q.Index].Counters.Packets
			buf := make([]byte, size)
			for seq := 0; seq < count; {
				if ctx.Err() != nil {
					return fmt.Errorf("queue %d: sent %d of %d: %w", q.ID, seq, count, ctx.Err())
				}
				if seq-int(got.Load()) >= window {
					if err := s.Flush(); err != nil {
						return err
					}
					time.Sleep(20 * time.Microsecond)
					continue
				}
				err := s.SendUDP(f, txpath.Options{}, payload(buf, q.ID, seq, size))
				switch {
				case errors.Is(err, txpath.ErrRingFull) || errors.Is(err, txpath.ErrNoFrames):
					if err := s.Wait(ctx); err != nil {
						return err
					}
					continue
				case err != nil:
					return err
				}
				seq++
				q.Counters.Packets.Add(1)
			}
			return s.Flush()
		})
	}()
	if during != nil {
		during()
	}
	if err := <-txDone; err != nil {
		t.Errorf("senders: %v", err)
	}
	var rxErr error
wait:
	for ctx.Err() == nil {
		if st := b.rx.Stats().Total; st.Packets+st.Drops >= uint64(count*len(checkers)) {
			break
		}
		select {
		case rxErr = <-rxDone: // closed by during
			rxDone <- rxErr
			break wait
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-rxDone; err != nil {
		t.Errorf("receivers: %v", err)
	}
	if err, _ := errs.Load().(error); err != nil {
		t.Error(err)
	}
	return checkers
}

// waitRunning waits until every queue of s has its thread and its poller
// went to sleep once (its Fill ring is full).
func waitRunning(t *testing.T, s *mq.Set) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ready := true
		for _, q := range s.Queues() {
			st, _ := q.Poller.Stats()
			ready = ready && q.Thread() != 0 && st.Sleeps > 0
		}
		if ready {
			return
		}
	}
	t.Fatal("queues did not start")
}

// TestQueueToPeerQueue: what an AF_XDP socket sends on queue i of one veth
// end arrives on queue i of the other (veth takes the peer's RX queue from
// the skb's queue mapping, which AF_XDP's copy mode sets to the socket's
// queue), every queue carries its share, byte-exact, and Close gets every
// frame back.
func TestQueueToPeerQueue(t *testing.T) {
	for _, queues := range []int{2, 4} {
		t.Run(strconv.Itoa(queues), func(t *testing.T) {
			b := newBed(t, queues, 1500)
			const count = 20000
			checkers := b.traffic(t, count, 1400, 128, 60*time.Second, nil)
			st := b.rx.Stats()
			for i, c := range checkers {
				qs := st.Queues[i]
				if qs.Packets != count || qs.Drops != 0 || c.wrongQ.Load() != 0 {
					t.Errorf("queue %d: %d datagrams of %d, %d bad, %d from another queue", qs.ID, qs.Packets, count, qs.Drops, c.wrongQ.Load())
				}
				if q := b.rx.Queues()[i]; q.CPUTime() <= 0 {
					t.Errorf("queue %d: thread CPU time %v", q.ID, q.CPUTime())
				}
				if qs.RXPackets != qs.Packets {
					t.Errorf("queue %d: poller took %d packets, checker counted %d", qs.ID, qs.RXPackets, qs.Packets)
				}
			}
			if st.Total.Packets != uint64(count*queues) {
				t.Errorf("total %d, want %d", st.Total.Packets, count*queues)
			}
			if tx := b.tx.Stats().Total.Packets; tx != uint64(count*queues) {
				t.Errorf("senders counted %d, want %d", tx, count*queues)
			}
			t.Logf("per queue: %+v", st.Queues)
		})
	}
}

// TestJumboQueues: 9000-byte frames as multi-buffer chains on 2 queues.
func TestJumboQueues(t *testing.T) {
	b := newBed(t, 2, 9000)
	const count = 2000
	b.traffic(t, count, 8900, 64, 60*time.Second, nil)
	st := b.rx.Stats()
	for _, qs := range st.Queues {
		if qs.Packets != count || qs.Drops != 0 {
			t.Errorf("queue %d: %d of %d, %d bad", qs.ID, qs.Packets, count, qs.Drops)
		}
	}
}

// TestPinning: while Run runs, each queue's thread may run only on its
// CPU (sched_getaffinity) and last ran there (/proc/self/task/TID/stat).
func TestPinning(t *testing.T) {
	b := newBed(t, 4, 1500)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- b.rx.Run(ctx, func(q *mq.Queue) rxpath.Handler { return rxpath.HandlerFunc(func(*rxpath.Packet) {}) })
	}()
	waitRunning(t, b.rx)
	tids := map[int]bool{}
	for _, q := range b.rx.Queues() {
		tid := q.Thread()
		tids[tid] = true
		cpus, err := mq.ThreadCPUs(tid)
		if err != nil || !slices.Equal(cpus, []int{q.CPU}) {
			t.Errorf("queue %d thread %d may run on %v (%v), want [%d]", q.ID, tid, cpus, err, q.CPU)
		}
		if last, err := lastCPU(tid); err != nil || last != q.CPU {
			t.Errorf("queue %d thread %d last ran on CPU %d (%v), want %d", q.ID, tid, last, err, q.CPU)
		}
	}
	if len(tids) != len(b.rx.Queues()) {
		t.Errorf("%d threads for %d queues", len(tids), len(b.rx.Queues()))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, q := range b.rx.Queues() {
		if q.Thread() != 0 {
			t.Errorf("queue %d: thread %d after Run", q.ID, q.Thread())
		}
	}
}

// lastCPU reads field 39 (processor) of /proc/self/task/TID/stat.
func lastCPU(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		return -1, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 on
	return strconv.Atoi(f[39-3])
}

// TestCloseUnderTraffic: Close while every queue receives and sends
// stops all queues and gets every frame back (Close reports
// ErrFramesLost otherwise; the test binary's leak check sees sockets and
// mappings).
func TestCloseUnderTraffic(t *testing.T) {
	b := newBed(t, 4, 1500)
	b.traffic(t, 1<<30, 1000, 200, 20*time.Second, func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if b.rx.Stats().Total.Packets > 20000 {
				break
			}
		}
		st := b.rx.Stats()
		for _, qs := range st.Queues {
			if qs.Packets == 0 {
				t.Errorf("queue %d carried nothing before Close", qs.ID)
			}
		}
		// Close both Sets while their goroutines run: Run and Go return.
		if err := b.rx.Close(); err != nil {
			t.Errorf("receiver Close under traffic: %v", err)
		}
		err := b.a.Do(func() error {
			l, err := netlink.LinkByName(b.pair.A.Name)
			if err != nil {
				return err
			}
			if x := l.Attrs().Xdp; x != nil && (x.Attached || x.ProgId != 0) {
				return fmt.Errorf("XDP program %d still attached to %s after Close", x.ProgId, b.pair.A.Name)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		if err := b.tx.Close(); err != nil {
			t.Errorf("sender Close under traffic: %v", err)
		}
	})
}

// TestChannels sets a veth's queue count through ethtool and opens as many
// queues as it then has.
func TestChannels(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: 4})
	err := a.Do(func() error {
		ch, err := mq.Channels(p.A.Name)
		if err != nil {
			return err
		}
		if ch.MaxRX != 4 || ch.Queues() != 4 {
			return fmt.Errorf("channels %+v, want 4 RX queues of at most 4", ch)
		}
		if ch, err = mq.SetChannels(p.A.Name, 2); err != nil || ch.Queues() != 2 || ch.TX != 2 {
			return fmt.Errorf("SetChannels 2: %+v, %w", ch, err)
		}
		if _, err := mq.SetChannels(p.A.Name, 5); err == nil {
			return errors.New("SetChannels 5 on a 4-queue veth succeeded")
		}
		s, err := mq.Open(&mq.Config{Ifnames: []string{p.A.Name}, NoProgram: true, NoPoller: true})
		if err != nil {
			return err
		}
		n := len(s.Queues())
		if err := s.Close(); err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("Open made %d queues on a device with 2", n)
		}
		if ch, err = mq.SetChannels(p.A.Name, 4); err != nil || ch.Queues() != 4 {
			return fmt.Errorf("SetChannels 4: %+v, %w", ch, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenErrors: bad configs fail up front and leave nothing open.
func TestOpenErrors(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: 2})
	err := a.Do(func() error {
		for _, c := range []mq.Config{
			{},
			{Ifnames: []string{p.A.Name, p.A.Name}},
			{Ifnames: []string{p.A.Name}, Queues: []int{0, 0}},
			{Ifnames: []string{p.A.Name}, Queues: []int{-1}},
			{Ifnames: []string{p.A.Name}, Queues: []int{0, 1}, CPUs: []int{0}},
			{Ifnames: []string{p.A.Name}, Queues: []int{0, 2}}, // queue 2 does not exist
		} {
			if s, err := mq.Open(&c); err == nil {
				s.Close()
				return fmt.Errorf("Open(%+v) succeeded", c)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
