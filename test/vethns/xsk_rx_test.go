package vethns_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// rxSetup is an AF_XDP receiver on one veth end: UMEM, sockets on the
// given queues sharing it, the XDP program with them registered, and the
// Fill rings filled.
type rxSetup struct {
	u     *umem.UMEM
	socks []*xsk.Socket
	prog  *xsk.Program
}

func newRX(t testing.TB, ns *vethns.NS, ifname string, queues int, filter *xsk.Filter) *rxSetup {
	t.Helper()
	r := &rxSetup{}
	err := ns.Do(func() error {
		var err error
		r.u, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: uint32(4096 * queues)})
		if err != nil {
			return err
		}
		r.prog, err = xsk.AttachProgram(ifname, &xsk.ProgramConfig{Filter: filter})
		if err != nil {
			return err
		}
		addrs := make([]uint64, 2048)
		for q := 0; q < queues; q++ {
			s, err := xsk.New(ifname, q, r.u, &xsk.Config{NoTX: true})
			if err != nil {
				return err
			}
			r.socks = append(r.socks, s)
			n := r.u.GetBatch(addrs)
			if got := s.Fill().Produce(addrs[:n]); got != n {
				return fmt.Errorf("fill ring took %d of %d", got, n)
			}
			if err := r.prog.Register(s); err != nil {
				return err
			}
		}
		return nil
	})
	t.Cleanup(func() { r.close(t) })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rxSetup) close(t testing.TB) {
	if r.prog != nil {
		if err := r.prog.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, s := range r.socks {
		// Frames on the Fill ring come back with the socket.
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
	if r.u != nil {
		if err := r.u.Close(); err != nil {
			t.Error(err)
		}
	}
}

// filler gives frames back to a Fill ring as rxpath does: what the ring
// does not take now waits and goes first next time. The kernel publishes
// the RX producer index in xsk_flush before it releases the Fill consumer
// index (and otherwise only when it refreshes its cached batch), so user
// space can hold k new RX descriptors while a Fill ring it filled to
// capacity still looks full. A short Produce is normal, not an error.
type filler struct {
	ring    *xsk.FillRing
	pending []uint64
}

// give queues addrs for the ring and puts on it as many queued frames as
// it takes.
func (f *filler) give(addrs ...uint64) {
	f.pending = append(f.pending, addrs...)
	f.flush()
}

func (f *filler) flush() {
	n := f.ring.Produce(f.pending)
	f.pending = f.pending[:copy(f.pending, f.pending[n:])]
}

// drain waits (bounded) until the ring took every queued frame: once
// traffic stops, the kernel's last xsk_flush has published its consumer
// index.
func (f *filler) drain(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(f.pending) > 0; {
		f.flush()
		if time.Now().After(deadline) {
			t.Fatalf("the Fill ring took no more frames for 5 s: %d waiting, %d on the ring", len(f.pending), f.ring.Len())
		}
		runtime.Gosched()
	}
}

// waitParked returns once a goroutine is parked on the runtime poller
// ("IO wait") inside fn, so that what the test does next has to wake it.
func waitParked(t testing.TB, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		all := buf[:runtime.Stack(buf, true)]
		for _, g := range bytes.Split(all, []byte("\n\n")) {
			if bytes.Contains(g, []byte("[IO wait")) && bytes.Contains(g, []byte(fn)) {
				return
			}
		}
	}
	t.Fatalf("no goroutine parked in %s within 5 s", fn)
}

// udpPayload returns the UDP payload of an Ethernet frame, with the
// source port, or false.
func udpPayload(f []byte) (sport uint16, p []byte, ok bool) {
	if len(f) < 14 {
		return 0, nil, false
	}
	var l4 []byte
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		if len(f) < 34 || f[23] != 17 {
			return 0, nil, false
		}
		l4 = f[14+int(f[14]&15)*4:]
	case 0x86dd:
		if len(f) < 62 || f[20] != 17 {
			return 0, nil, false
		}
		l4 = f[54:]
	default:
		return 0, nil, false
	}
	if len(l4) < 8 || int(binary.BigEndian.Uint16(l4[4:])) > len(l4) {
		return 0, nil, false
	}
	return binary.BigEndian.Uint16(l4), l4[8:binary.BigEndian.Uint16(l4[4:])], true
}

func TestXSKRX(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	rx := newRX(t, a, p.A.Name, 1, &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}})
	if rx.socks[0].ZeroCopy() {
		t.Fatal("veth bound in zero-copy mode")
	}
	runRX(t, b, p, rx, 100000)
}

// runRX sends n datagrams of varying sizes from a kernel UDP socket on
// p.B to rx's socket on p.A, at most p.InFlight() in flight, and checks that each
// arrives once, in order and byte-exact, that the kernel dropped none, and
// that every frame is back on the Fill ring at the end.
func runRX(t *testing.T, b *vethns.NS, p *vethns.Pair, rx *rxSetup, n int) {
	sock := rx.socks[0]
	start := rx.u.Accounting()
	if start.Held != 0 {
		t.Fatalf("frames held before the run: %s", start)
	}
	conn, err := b.DialUDP(p.B.AddrPort4(5000), p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fill := &filler{ring: sock.Fill()}
	primeRX(t, b, p, rx)

	var received, sent atomic.Int64
	tx0, _ := txPackets(p.B)
	sendErr := make(chan error, 1)
	done := make(chan struct{}) // the receiving loop ended: stop sending
	defer close(done)
	go func() {
		buf := make([]byte, 2048)
		deadline := time.Now().Add(60 * time.Second)
		if err := conn.SetWriteDeadline(deadline); err != nil {
			sendErr <- err
			return
		}
		for i := 0; i < n; i++ {
			// At most p.InFlight(): below the 256-entry ring in which
			// veth queues packets for XDP, which overflows (and drops)
			// when softirqs are deferred on a loaded machine.
			for int64(i)-received.Load() >= p.InFlight() {
				if time.Now().After(deadline) {
					sendErr <- fmt.Errorf("receiver stalled at %d of %d", received.Load(), n)
					return
				}
				select {
				case <-done:
					return
				default:
				}
				time.Sleep(20 * time.Microsecond)
			}
			if _, err := conn.Write(payload(buf, i)); err != nil {
				sendErr <- fmt.Errorf("datagram %d: %w", i, err)
				return
			}
			sent.Store(int64(i + 1))
		}
		sendErr <- nil
	}()

	descs := make([]xsk.Desc, 64)
	addrs := make([]uint64, 64)
	want := make([]byte, 2048)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := 0
	var gaps [][2]int // [first missing, first received after them]
	var hist []string
	// A wait that sees nothing for 5 s notes where the frames and the
	// datagrams are; if the sending device then transmits nothing for
	// another 5 s while datagrams wait in it, the link stopped, not the
	// socket, and the test says so at once.
	var stall *rxStall
	last := time.Now()
	maxPending, minFill := 0, fill.ring.Size()
	for next < n {
		k := sock.RX().Consume(descs)
		if k == 0 {
			if err := sock.KickRX(); err != nil {
				t.Fatal(err)
			}
			wait, stop := context.WithTimeout(ctx, 5*time.Second)
			err := sock.WaitRX(wait)
			stop()
			if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				if k := sock.RX().Len(); k > 0 {
					// WaitRX missed their wake-up (or they came just as
					// its deadline passed): go on, to see the rest.
					t.Errorf("after %d datagrams: WaitRX returned at its 5 s deadline with %d descriptors on the RX ring", next, k)
					continue
				}
				select {
				case err := <-sendErr:
					if err != nil {
						t.Fatalf("after %d datagrams (%d sent) nothing arrived for 5 s and the sender failed: %v", next, sent.Load(), err)
					}
					sendErr <- nil // it finished: for the check after the loop
				default:
				}
				if stall == nil {
					stall = newRXStall(sock, fill, rx.u, p)
				} else if why := stall.linkStopped(p, sent.Load()-int64(next), tx0, sent.Load()); why != "" {
					t.Fatalf("after %d datagrams (%d sent, %d gaps) nothing arrived for %v: %s\nwhen the wait began: %s\nnow: %s\n%s; %s",
						next, sent.Load(), len(gaps), time.Since(last).Round(time.Millisecond), why, stall.state, rxState(sock, fill, rx.u, p), senderState(sendErr), probeStalled(b, p, rx, fill))
				}
				continue
			}
			if err != nil {
				var then string
				if stall != nil {
					then = stall.state
				}
				t.Fatalf("after %d datagrams (%d sent, %d gaps) the RX ring stayed empty for %v: %v\nwhen the wait began: %s\nat the end: %s\n%s; %s",
					next, sent.Load(), len(gaps), time.Since(last).Round(time.Millisecond), err, then, rxState(sock, fill, rx.u, p), senderState(sendErr), probeStalled(b, p, rx, fill))
			}
			continue
		}
		last, stall = time.Now(), nil
		for i, d := range descs[:k] {
			f, ok := rx.u.Data(d.Addr, d.Len)
			if !ok {
				t.Fatalf("descriptor %+v outside the UMEM", d)
			}
			sport, pl, ok := udpPayload(f)
			if ok && sport == primePort {
				// A priming datagram that came after the first.
				addrs[i] = d.Addr
				continue
			}
			if !ok || sport != 5000 {
				t.Fatalf("datagram %d: not our UDP frame: % x", next, f[:min(len(f), 64)])
			}
			if !bytes.Equal(pl, payload(want, next)) {
				seq := -1
				if len(pl) >= 4 {
					seq = int(binary.BigEndian.Uint32(pl))
				}
				if seq <= next || seq >= n || !bytes.Equal(pl, payload(want, seq)) {
					st, _ := sock.Stats()
					t.Fatalf("datagram %d: payload differs (%d bytes, sequence %d) at %#x len %d; first descriptors %v; socket stats %+v", next, len(pl), seq, d.Addr, d.Len, hist, st)
				}
				// Datagrams next..seq-1 are missing: go on, to say
				// at the end how many and where.
				gaps = append(gaps, [2]int{next, seq})
				next = seq
			}
			if len(hist) < 8 {
				hist = append(hist, fmt.Sprintf("%#x/%d/seq%d", d.Addr, d.Len, next))
			}
			addrs[i] = d.Addr
			next++
		}
		minFill = min(minFill, fill.ring.Len()) // before the frames go back
		fill.give(addrs[:k]...)
		received.Store(int64(next))
		maxPending = max(maxPending, len(fill.pending))
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	fill.drain(t)
	st, err := sock.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps) > 0 {
		t.Fatalf("datagrams missing (each [first missing, next received]): %v; socket stats %+v", gaps, st)
	}
	if st.RXDropped != 0 || st.RXRingFull != 0 || st.RXInvalidDescs != 0 {
		t.Fatalf("the kernel dropped frames: %+v", st)
	}
	acct := rx.u.Accounting()
	if acct.Fill != start.Fill || acct.Held != start.Held {
		t.Fatalf("after the run: %s", acct)
	}
	t.Logf("%d datagrams received byte-exact; stats %+v; %d recvfrom kicks; the Fill ring held at least %d frames for the kernel, at most %d waited for room", n, st, sock.Counters().KicksRX, minFill, maxPending)
}

// primePort is the source port of primeRX's datagrams.
const primePort = 5001

// primeRX sends datagrams from primePort to rx's socket until one
// arrives, giving every frame back to the Fill ring. A zero-copy driver
// posts receive buffers from the Fill ring when it next runs, not when
// the ring gets them, and QEMU's virtio-net queues a frame that finds no
// buffer, then delivers the next frame before it once buffers appear: two
// datagrams sent into that window arrive swapped. That is the emulated
// wire, not the kernel; once one datagram went through, the driver has
// buffers and QEMU's queue is empty, and the counted run starts.
func primeRX(t *testing.T, b *vethns.NS, p *vethns.Pair, rx *rxSetup) {
	t.Helper()
	conn, err := b.DialUDP(p.B.AddrPort4(primePort), p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sock := rx.socks[0]
	descs := make([]xsk.Desc, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A device that stopped transmitting fills the socket's send buffer
	// and blocks the write: bounded, it fails the test instead.
	if d, ok := ctx.Deadline(); ok {
		if err := conn.SetWriteDeadline(d); err != nil {
			t.Fatal(err)
		}
	}
	for sent := 0; ; sent++ {
		if sent == 300 || ctx.Err() != nil {
			t.Fatalf("no priming datagram arrived after %d sent", sent)
		}
		if _, err := conn.Write([]byte("prime")); err != nil {
			tx, _ := txPackets(p.B)
			t.Fatalf("priming datagram %d: %v (%s has transmitted %d packets: a write waits only while the device holds the socket's send buffer)", sent, err, p.B.Name, tx)
		}
		wait, stop := context.WithTimeout(ctx, 100*time.Millisecond)
		got := false
		for !got {
			k := sock.RX().Consume(descs)
			if k == 0 {
				if err := sock.KickRX(); err != nil {
					t.Fatal(err)
				}
				if sock.WaitRX(wait) != nil {
					break
				}
				continue
			}
			for _, d := range descs[:k] {
				f, ok := rx.u.Data(d.Addr, d.Len)
				if !ok {
					t.Fatalf("descriptor %+v outside the UMEM", d)
				}
				if sport, _, ok := udpPayload(f); !ok || sport != primePort {
					t.Fatalf("priming: not our UDP frame: % x", f[:min(len(f), 64)])
				}
				if sock.Fill().Produce([]uint64{d.Addr}) != 1 {
					t.Fatal("the Fill ring is full while priming")
				}
			}
			got = true
		}
		stop()
		if got {
			return
		}
	}
}

// TestXSKSharedUMEMQueues: four queues of one veth, four sockets sharing
// one UMEM; each flow lands on exactly one queue, every queue gets flows,
// and every datagram arrives.
func TestXSKSharedUMEMQueues(t *testing.T) {
	vethns.Require(t)
	// The sender's flow hash (random seed) picks each flow's queue: with
	// 64 flows the chance that one of 4 queues gets none is 4*(3/4)^64,
	// about 4e-8 (with the 32 flows before it was 4e-4: seen once).
	// 64*30 datagrams are fewer than a Fill ring's 2048 in all.
	const queues, flows, perFlow = 4, 64, 30
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: queues})
	rx := newRX(t, a, p.A.Name, queues, &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}})

	// The flows one after the other, at most 128 datagrams in flight in
	// all: below the 256-entry ring in which veth queues packets for XDP
	// even if every flow hashes to the same queue.
	var received atomic.Int64
	sendErr := make(chan error, 1)
	conns := make([]*net.UDPConn, flows)
	for f := range conns {
		conn, err := b.DialUDP(p.B.AddrPort4(uint16(6000+f)), p.A.AddrPort4(9000))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns[f] = conn
	}
	go func() {
		buf := make([]byte, 2048)
		deadline := time.Now().Add(20 * time.Second)
		sent := int64(0)
		for _, conn := range conns {
			for i := 0; i < perFlow; i++ {
				for sent-received.Load() >= 128 {
					if time.Now().After(deadline) {
						sendErr <- fmt.Errorf("receiver stalled at %d of %d", received.Load(), flows*perFlow)
						return
					}
					time.Sleep(20 * time.Microsecond)
				}
				if _, err := conn.Write(payload(buf, i)); err != nil {
					sendErr <- err
					return
				}
				sent++
			}
		}
		sendErr <- nil
	}()
	flowQueue := map[uint16]int{}
	count := map[uint16]int{}
	perQueue := make([]int, queues)
	descs := make([]xsk.Desc, 64)
	fills := make([]*filler, queues)
	for q, s := range rx.socks {
		fills[q] = &filler{ring: s.Fill()}
	}
	deadline := time.Now().Add(30 * time.Second)
	total := 0
	for total < flows*perFlow && time.Now().Before(deadline) {
		idle := true
		for q, s := range rx.socks {
			k := s.RX().Consume(descs)
			for _, d := range descs[:k] {
				f, ok := rx.u.Data(d.Addr, d.Len)
				sport, pl, ok2 := udpPayload(f)
				if !ok || !ok2 {
					t.Fatalf("queue %d: bad frame", q)
				}
				if prev, seen := flowQueue[sport]; seen && prev != q {
					t.Fatalf("flow %d on queues %d and %d", sport, prev, q)
				}
				flowQueue[sport] = q
				if seq := int(binary.BigEndian.Uint32(pl)); seq != count[sport] {
					t.Fatalf("flow %d: sequence %d, want %d", sport, seq, count[sport])
				}
				count[sport]++
				perQueue[q]++
				fills[q].give(d.Addr)
			}
			total += k
			received.Add(int64(k))
			if k > 0 {
				idle = false
			}
		}
		if idle {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if total != flows*perFlow {
		t.Fatalf("received %d of %d datagrams; per queue %v", total, flows*perFlow, perQueue)
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	for q, n := range perQueue {
		if n == 0 {
			t.Fatalf("queue %d received nothing; per queue %v", q, perQueue)
		}
	}
	t.Logf("per queue: %v", perQueue)
}

var _ = netip.Addr{}

// TestXSKWait: WaitRX parks on the runtime poller, returns when a packet
// arrives, honours its context, and returns when the socket closes.
func TestXSKWait(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	rx := newRX(t, a, p.A.Name, 1, &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}})
	sock := rx.socks[0]

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	err := sock.WaitRX(ctx)
	cancel()
	if err != context.DeadlineExceeded || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("WaitRX with no traffic = %v after %v", err, time.Since(start))
	}

	conn, err := b.DialUDP(p.B.AddrPort4(5000), p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	woke := make(chan error, 1)
	go func() { woke <- sock.WaitRX(context.Background()) }()
	waitParked(t, "xsk.(*Socket).WaitRX")
	if _, err := conn.Write([]byte("wake up")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil || sock.RX().Len() != 1 {
			t.Fatalf("WaitRX = %v with %d descriptors", err, sock.RX().Len())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitRX did not wake for a packet")
	}

	descs := make([]xsk.Desc, 4)
	if n := sock.RX().Consume(descs); n != 1 {
		t.Fatalf("Consume = %d", n)
	}
	if err := rx.u.Put(descs[0].Addr); err != nil {
		t.Fatal(err)
	}
	go func() { woke <- sock.WaitRX(context.Background()) }()
	waitParked(t, "xsk.(*Socket).WaitRX")
	if err := rx.prog.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sock.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("WaitRX after Close = %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitRX did not return after Close")
	}
	// After Close: an error, not a read of unmapped ring memory.
	if err := sock.WaitRX(context.Background()); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("WaitRX on a closed socket = %v, want os.ErrClosed", err)
	}
}

// TestXSKWaitDeadlineRace: a context that ends just as a packet arrives
// must not leave an expired deadline behind for the next wait.
func TestXSKWaitDeadlineRace(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	rx := newRX(t, a, p.A.Name, 1, &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}})
	sock := rx.socks[0]
	conn, err := b.DialUDP(p.B.AddrPort4(5000), p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	descs := make([]xsk.Desc, 64)
	addrs := make([]uint64, 64)
	fill := &filler{ring: sock.Fill()}
	drain := func() {
		for {
			k := sock.RX().Consume(descs)
			if k == 0 {
				return
			}
			for i, d := range descs[:k] {
				addrs[i] = rx.u.Base(d.Addr)
			}
			fill.give(addrs[:k]...)
		}
	}
	for i := 0; i < 300; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			conn.Write([]byte("x"))
			runtime.Gosched()
			cancel()
		}()
		if err := sock.WaitRX(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("iteration %d: %v", i, err)
		}
		cancel()
		time.Sleep(20 * time.Microsecond)
		drain()
		// A fresh context must wait its time, not fail at once.
		ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Millisecond)
		err := sock.WaitRX(ctx2)
		cancel2()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("iteration %d: a wait with a live context failed at once: %v", i, err)
		}
		drain()
	}
}
