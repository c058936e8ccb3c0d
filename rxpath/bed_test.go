package rxpath_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/internal/xdpprog"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

const port = 7777

// bed is a veth pair with AF_XDP sockets on every queue of end A (in
// namespace a) behind the XDP program, a Poller over them, and the peer
// namespace b to send from.
type bed struct {
	a, b   *vethns.NS
	pair   *vethns.Pair
	u      *umem.UMEM
	socks  []*xsk.Socket
	prog   *xdpprog.Program
	poller *rxpath.Poller
	closed bool
}

type bedConfig struct {
	queues      int
	mtu         int
	multiBuffer bool
	frames      uint32
	xsk         xsk.Config
	rx          rxpath.Config
}

// newBed ends the test as not applicable where the kernel lacks
// multi-buffer (c.multiBuffer) and the library says so.
func newBed(t testing.TB, c bedConfig) *bed {
	t.Helper()
	vethns.Require(t)
	if c.queues == 0 {
		c.queues = 1
	}
	if c.frames == 0 {
		c.frames = 4096
	}
	b := &bed{a: vethns.NewNS(t), b: vethns.NewNS(t)}
	b.pair = vethns.NewPair(t, b.a, b.b, &vethns.PairConfig{Queues: c.queues, MTU: c.mtu})
	err := b.a.Do(func() error {
		var err error
		b.u, err = umem.New(&umem.Config{FrameCount: c.frames})
		if err != nil {
			return err
		}
		b.prog, err = xdpprog.Load(&xdpprog.Config{Filter: &xdpprog.Filter{IPv4UDP: true, DstPorts: []uint16{port}}})
		if err != nil {
			return err
		}
		if _, err := b.prog.Attach(b.pair.A.Index, xdpprog.ModeAuto); err != nil {
			return err
		}
		for q := 0; q < c.queues; q++ {
			xc := c.xsk
			xc.MultiBuffer = c.multiBuffer
			xc.RXSize, xc.FillSize = 2048, 2048
			s, err := xsk.New(b.pair.A.Name, q, b.u, &xc)
			if err != nil {
				return err
			}
			b.socks = append(b.socks, s)
			if err := b.prog.Register(q, s.FD()); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		b.poller, err = rxpath.New(&c.rx, b.socks...)
	}
	t.Cleanup(func() { b.close(t) })
	if c.multiBuffer && errors.Is(err, xsk.ErrNotSupported) {
		vethns.NotApplicable(t, "AF_XDP multi-buffer", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// close tears the bed down and checks that every frame came back.
func (b *bed) close(t testing.TB) {
	if b.closed {
		return
	}
	b.closed = true
	if b.prog != nil {
		if err := b.prog.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, s := range b.socks {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
	if b.poller != nil {
		if _, err := b.poller.Reclaim(); err != nil {
			t.Error(err)
		}
		if err := b.poller.Close(); err != nil {
			t.Error(err)
		}
	}
	if b.u != nil {
		if acct := b.u.Accounting(); acct.Free != acct.Total {
			t.Errorf("frames not back after the run: %s", acct)
		}
		if err := b.u.Close(); err != nil {
			t.Error(err)
		}
	}
}

// stats returns the poller's Stats; an error fails the test.
func (b *bed) stats(t testing.TB) rxpath.Stats {
	t.Helper()
	st, err := b.poller.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// run starts the poller; stop cancels it and returns Run's error.
func (b *bed) run(h rxpath.Handler) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.poller.Run(ctx, h) }()
	// Wait until Run has filled the rings and gone to sleep once, so that
	// no early packet meets an empty Fill ring.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if st, _ := b.poller.Stats(); st.Sleeps > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return func() error {
		cancel()
		err := <-done
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
}

// payload writes datagram seq of a flow into buf: flow, sequence number,
// then a pattern; its size varies from 18 to size bytes.
func payload(buf []byte, flow, seq, size int) []byte {
	n := 18 + (seq*37+flow*101)%(size-17)
	b := buf[:n]
	binary.BigEndian.PutUint16(b, uint16(flow))
	binary.BigEndian.PutUint32(b[2:], uint32(seq))
	for i := 6; i < n; i++ {
		b[i] = byte(seq*3 + flow + i*7)
	}
	return b
}

// udpPayload returns the UDP payload and source port of an Ethernet/IPv4
// frame, or false.
func udpPayload(f []byte) ([]byte, uint16, bool) {
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return nil, 0, false
	}
	ihl := int(f[14]&0x0f) * 4
	tot := int(binary.BigEndian.Uint16(f[16:]))
	if f[23] != 17 || 14+tot > len(f) || tot < ihl+8 {
		return nil, 0, false
	}
	u := f[14+ihl : 14+tot]
	return u[8:], binary.BigEndian.Uint16(u), true
}

// sender sends count datagrams on each of flows connected UDP sockets in
// namespace ns to dst, keeping at most window unacknowledged in all when
// window > 0 (acked counts the receiver's datagrams). Bounded in time.
type sender struct {
	conns []*net.UDPConn
	sent  atomic.Int64
}

func newSender(t testing.TB, ns *vethns.NS, dst netip.AddrPort, flows int) *sender {
	t.Helper()
	s := &sender{}
	for range flows {
		c, err := ns.DialUDP(netip.AddrPort{}, dst)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s.conns = append(s.conns, c)
	}
	return s
}

func (s *sender) srcPorts() []uint16 {
	var ps []uint16
	for _, c := range s.conns {
		ps = append(ps, uint16(c.LocalAddr().(*net.UDPAddr).Port))
	}
	return ps
}

// send sends count datagrams of size bytes on every flow, keeping at most
// window unacknowledged (acked counts what the receiver got). limit is how
// long the receiver may make no progress (on a slow or emulated machine a
// run takes longer, not a different path); the whole send is bounded by 20
// limits.
func (s *sender) send(count, size int, window int64, acked *atomic.Int64, limit time.Duration) error {
	hardStop := time.Now().Add(20 * limit)
	// Progress is what the receiver acknowledged, or without a window
	// what was sent.
	progress := func() int64 {
		if window > 0 {
			return acked.Load()
		}
		return s.sent.Load()
	}
	var mu sync.Mutex
	last, lastAt := progress(), time.Now()
	stalled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if p := progress(); p != last {
			last, lastAt = p, now
		}
		return now.Sub(lastAt) > limit || now.After(hardStop)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(s.conns))
	for f, c := range s.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 9000)
			for seq := 0; seq < count; seq++ {
				for window > 0 && s.sent.Load()-acked.Load() >= window {
					if stalled() {
						errs[f] = fmt.Errorf("flow %d: stuck at %d of %d (sent %d, acked %d)", f, seq, count, s.sent.Load(), acked.Load())
						return
					}
					time.Sleep(20 * time.Microsecond)
				}
				if seq%256 == 0 && stalled() {
					errs[f] = fmt.Errorf("flow %d: time limit at %d of %d", f, seq, count)
					return
				}
				if _, err := c.Write(payload(buf, f, seq, size)); err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					// ENOBUFS and friends: the kernel queue is full.
					if stalled() {
						errs[f] = fmt.Errorf("flow %d: %w", f, err)
						return
					}
					time.Sleep(50 * time.Microsecond)
					seq--
					continue
				}
				s.sent.Add(1)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
