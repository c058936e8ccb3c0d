package vethns_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// faultBed runs traffic both ways over one AF_XDP socket on end A of a
// veth pair while a test injects a fault: a kernel UDP sender in B feeds
// an rxpath poller on A, and a txpath sender on A feeds a kernel UDP
// receiver in B. Every counter is atomic; stop ends the traffic and
// checks that every UMEM frame came back.
type faultBed struct {
	t    *testing.T
	a, b *vethns.NS
	p    *vethns.Pair

	u      *umem.UMEM
	prog   *xsk.Program
	s      *xsk.Socket
	poller *rxpath.Poller
	sender *txpath.Sender
	flow   *txpath.UDPFlow

	rxGot, rxSent, rxSendErr atomic.Int64 // AF_XDP receiving
	txGot, txSent, txErrs    atomic.Int64 // AF_XDP sending
	txErr                    atomic.Value // the last send error
	// Every datagram carries its sequence number; each receiver checks
	// that none comes twice and counts the gaps (loss). A link flap may
	// reorder what was in flight (the kernel does not promise UDP order
	// across it): a late datagram is counted as reordered, not lost. The
	// RX handler runs on the poller's goroutine, the TX receiver on its
	// own; each has its own record of what it saw.
	rxLast, txLast int64
	rxSeen, txSeen seqSet
	allowLate      bool // the fault may reorder (a link flap, a peer gone)
	rxGaps, txGaps atomic.Int64
	rxDups, txDups atomic.Int64
	rxLate, txLate atomic.Int64
	dupMu          sync.Mutex
	firstDup       string       // the first duplicate or reordered datagram each way
	rxBad          atomic.Int64 // frames that are not our datagrams
	txWindow       int64        // > 0: the sender keeps at most this many unreceived
	errMu          sync.Mutex
	errs           []error // every unexpected send error (the first 1000)
	runErr         chan error
	stopTraffic    chan struct{}
	wg             sync.WaitGroup
	cancel         context.CancelFunc
	rxConn, txConn *net.UDPConn
	slow           atomic.Bool // the RX handler is slow
	haltOnce       sync.Once
}

func newFaultBed(t *testing.T, scfg *xsk.Config) *faultBed {
	vethns.Require(t)
	f := &faultBed{t: t, runErr: make(chan error, 1), stopTraffic: make(chan struct{}), rxLast: -1, txLast: -1}
	f.a, f.b = vethns.NewNS(t), vethns.NewNS(t)
	f.p = vethns.NewPair(t, f.a, f.b, nil)
	err := f.a.Do(func() error {
		var err error
		if f.u, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: 8192}); err != nil {
			return err
		}
		if f.prog, err = xsk.AttachProgram(f.p.A.Name, &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}}}); err != nil {
			return err
		}
		if f.s, err = xsk.New(f.p.A.Name, 0, f.u, scfg); err != nil {
			return err
		}
		if err := f.prog.Register(f.s); err != nil {
			return err
		}
		if f.sender, err = txpath.New(f.s, &txpath.Config{Policy: txpath.Software}); err != nil {
			return err
		}
		f.flow, err = txpath.NewUDPFlow(f.p.A.MAC, f.p.B.MAC, f.p.A.AddrPort4(40000), f.p.B.AddrPort4(9001), nil)
		return err
	})
	if err != nil {
		f.teardown()
		t.Fatal(err)
	}
	f.poller, err = rxpath.New(&rxpath.Config{FillFrames: 2048}, f.s)
	if err != nil {
		f.teardown()
		t.Fatal(err)
	}
	if f.rxConn, err = f.b.DialUDP(f.p.B.AddrPort4(5000), f.p.A.AddrPort4(9000)); err != nil {
		f.teardown()
		t.Fatal(err)
	}
	if f.txConn, err = f.b.ListenUDP(f.p.B.AddrPort4(9001)); err != nil {
		f.teardown()
		t.Fatal(err)
	}
	if err := vethns.ForceReadBuffer(f.txConn, 8<<20); err != nil {
		f.teardown()
		t.Fatal(err)
	}
	t.Cleanup(f.teardown)
	return f
}

// start runs the poller and the three traffic goroutines, each bounded:
// about 20,000 datagrams a second each way, for at most limit.
func (f *faultBed) start(limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	f.cancel = cancel
	go func() {
		f.runErr <- f.poller.Run(ctx, rxpath.HandlerFunc(func(p *rxpath.Packet) {
			if f.slow.Load() {
				time.Sleep(200 * time.Microsecond)
			}
			sport, pl, ok := udpPayload(p.Data)
			if !ok || sport != 5000 || len(pl) != 200 {
				f.rxBad.Add(1)
				return
			}
			f.rxLast = f.sequence("RX", pl, f.rxLast, &f.rxSeen, &f.rxGaps, &f.rxDups, &f.rxLate)
			f.rxGot.Add(1)
		}))
	}()
	f.wg.Add(3)
	go func() { // kernel sender in B
		defer f.wg.Done()
		msg := make([]byte, 200)
		// Every attempt gets a number: a write that failed may still
		// have queued its datagram (a gap at worst, never a duplicate).
		for i := 0; ctx.Err() == nil && !f.stopped(); i++ {
			binary.BigEndian.PutUint64(msg, uint64(i))
			if _, err := f.rxConn.Write(msg); err != nil {
				f.rxSendErr.Add(1)
			} else {
				f.rxSent.Add(1)
			}
			if i%20 == 19 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	go func() { // kernel receiver in B
		defer f.wg.Done()
		buf := make([]byte, 2048)
		for ctx.Err() == nil && !f.stopped() {
			_ = f.txConn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			n, err := f.txConn.Read(buf)
			if err != nil {
				continue
			}
			if n != 200 {
				f.txDups.Add(1) // not a datagram of ours: counted as a failure
				continue
			}
			f.txLast = f.sequence("TX", buf[:n], f.txLast, &f.txSeen, &f.txGaps, &f.txDups, &f.txLate)
			f.txGot.Add(1)
		}
	}()
	go func() { // txpath sender on A
		defer f.wg.Done()
		payload := make([]byte, 200)
		// seq numbers every datagram that may have been queued: a send
		// that failed for backpressure (ErrNoFrames, ErrRingFull) queued
		// nothing and its number is used again; one that failed otherwise
		// (a kick refused while the link is down) may have queued it.
		seq := uint64(0)
		for i := 0; ctx.Err() == nil && !f.stopped(); i++ {
			for f.txWindow > 0 && f.txSent.Load()-f.txGot.Load() >= f.txWindow && ctx.Err() == nil && !f.stopped() {
				if err := f.sender.Flush(); err != nil {
					f.sendError(err)
				}
				time.Sleep(20 * time.Microsecond)
			}
			binary.BigEndian.PutUint64(payload, seq)
			err := f.sender.SendUDP(f.flow, txpath.Options{}, payload)
			switch {
			case err == nil:
				seq++
				f.txSent.Add(1)
				if i%20 == 19 {
					if err := f.sender.Flush(); err != nil {
						f.sendError(err)
					}
					time.Sleep(time.Millisecond)
				}
			case errors.Is(err, txpath.ErrNoFrames) || errors.Is(err, txpath.ErrRingFull):
				wctx, c := context.WithTimeout(ctx, 10*time.Millisecond)
				_ = f.sender.Wait(wctx)
				c()
			default:
				seq++
				f.sendError(err)
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
}

// sequence checks datagram payload p's sequence number against those seen
// and returns the highest: a gap is loss until the datagram comes late
// (then it counts in late instead), a number seen before a duplicate.
func (f *faultBed) sequence(dir string, p []byte, last int64, seen *seqSet, gaps, dups, late *atomic.Int64) int64 {
	seq := int64(binary.BigEndian.Uint64(p))
	if seq < 0 || seq > 1<<26 || seen.has(seq) {
		if dups.Add(1) == 1 {
			f.dupMu.Lock()
			f.firstDup += fmt.Sprintf(" %s: datagram %d again (highest %d);", dir, seq, last)
			f.dupMu.Unlock()
		}
		return last
	}
	seen.add(seq)
	if seq < last {
		gaps.Add(-1)
		late.Add(1)
		return last
	}
	gaps.Add(seq - last - 1)
	return seq
}

// seqSet is a set of sequence numbers, a bit each.
type seqSet []uint64

func (s *seqSet) has(n int64) bool {
	i := int(n / 64)
	return i < len(*s) && (*s)[i]&(1<<(n%64)) != 0
}

func (s *seqSet) add(n int64) {
	i := int(n / 64)
	for i >= len(*s) {
		*s = append(*s, 0)
	}
	(*s)[i] |= 1 << (n % 64)
}

// sendError records a send error: every one, not only the last.
func (f *faultBed) sendError(err error) {
	f.txErrs.Add(1)
	f.txErr.Store(err)
	f.errMu.Lock()
	if len(f.errs) < 1000 {
		f.errs = append(f.errs, err)
	}
	f.errMu.Unlock()
}

// checkErrors fails the test for every recorded send error that matches
// none of allowed.
func (f *faultBed) checkErrors(allowed ...error) {
	f.t.Helper()
	f.errMu.Lock()
	defer f.errMu.Unlock()
	bad := 0
	for _, err := range f.errs {
		ok := false
		for _, a := range allowed {
			ok = ok || errors.Is(err, a)
		}
		if !ok {
			if bad < 5 {
				f.t.Errorf("unexpected send error: %v", err)
			}
			bad++
		}
	}
	if bad > 0 {
		f.t.Errorf("%d unexpected send errors of %d", bad, f.txErrs.Load())
	}
}

// checkSequences fails the test for a duplicate datagram either way, or
// one that is not ours.
func (f *faultBed) checkSequences() {
	f.t.Helper()
	if d := f.rxDups.Load(); d != 0 {
		f.t.Errorf("AF_XDP RX: %d datagrams duplicated", d)
	}
	if d := f.txDups.Load(); d != 0 {
		f.t.Errorf("AF_XDP TX: %d datagrams duplicated or not ours", d)
	}
	if l, m := f.rxLate.Load(), f.txLate.Load(); l+m > 0 {
		if f.allowLate {
			f.t.Logf("reordered by the fault: %d datagrams late on AF_XDP RX, %d on AF_XDP TX", l, m)
		} else {
			f.t.Errorf("reordered: %d datagrams late on AF_XDP RX, %d on AF_XDP TX", l, m)
		}
	}
	if b := f.rxBad.Load(); b != 0 {
		f.t.Errorf("AF_XDP RX: %d frames that are not our datagrams", b)
	}
	f.dupMu.Lock()
	if f.firstDup != "" {
		f.t.Errorf("first duplicates:%s", f.firstDup)
	}
	f.dupMu.Unlock()
}

func (f *faultBed) stopped() bool {
	select {
	case <-f.stopTraffic:
		return true
	default:
		return false
	}
}

// waitGrowth waits until counter has grown by n, or fails.
func (f *faultBed) waitGrowth(what string, c *atomic.Int64, n int64) {
	f.t.Helper()
	from := c.Load()
	deadline := time.Now().Add(5 * time.Second)
	for c.Load()-from < n {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: grew by %d in 5 s, want %d", what, c.Load()-from, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// halt ends the traffic goroutines and the poller's context; it is
// idempotent.
func (f *faultBed) halt() {
	f.haltOnce.Do(func() {
		close(f.stopTraffic)
		f.wg.Wait()
		if f.cancel != nil {
			f.cancel()
		}
	})
}

// stop ends the traffic and returns what Run returned.
func (f *faultBed) stop() error {
	f.halt()
	select {
	case err := <-f.runErr:
		return err
	case <-time.After(5 * time.Second):
		f.t.Fatal("rxpath Run did not return after its context ended")
		return nil
	}
}

// teardown closes everything in the order the library asks and checks
// that every frame came back to the allocator.
func (f *faultBed) teardown() {
	f.halt() // a test that failed early left the traffic running
	if f.rxConn != nil {
		f.rxConn.Close()
	}
	if f.txConn != nil {
		f.txConn.Close()
	}
	if f.sender != nil {
		// ErrInFlight: the interface went away with frames on the ring;
		// os.ErrClosed: the socket was closed under the sender.
		if err := f.sender.Close(); err != nil && !errors.Is(err, txpath.ErrInFlight) && !errors.Is(err, os.ErrClosed) {
			f.t.Errorf("sender Close: %v", err)
		}
	}
	if f.prog != nil {
		f.prog.Close() // the link may be gone with its interface
	}
	if f.s != nil {
		if err := f.s.Close(); err != nil {
			f.t.Errorf("socket Close: %v", err)
		}
	}
	if f.poller != nil {
		if _, err := f.poller.Reclaim(); err != nil {
			f.t.Errorf("Reclaim: %v", err)
		}
		f.poller.Close()
	}
	if f.sender != nil {
		// Frames the kernel never completed are free once the socket is
		// closed.
		if _, err := f.sender.Reclaim(); err != nil {
			f.t.Errorf("sender Reclaim: %v", err)
		}
	}
	if f.u != nil {
		if a := f.u.Accounting(); a.Free != a.Total {
			f.t.Errorf("frames not back after the fault: %s", a)
		}
		if err := f.u.Close(); err != nil {
			f.t.Errorf("UMEM Close: %v", err)
		}
	}
	f.u, f.s, f.prog, f.poller, f.sender, f.rxConn, f.txConn = nil, nil, nil, nil, nil, nil, nil
}

func (f *faultBed) report() {
	f.t.Logf("AF_XDP RX: %d of %d received, %d lost (%d send errors at the peer); AF_XDP TX: %d of %d received, %d lost, %d send errors (last: %v)",
		f.rxGot.Load(), f.rxSent.Load(), f.rxGaps.Load(), f.rxSendErr.Load(), f.txGot.Load(), f.txSent.Load(), f.txGaps.Load(), f.txErrs.Load(), f.txErr.Load())
	f.checkSequences()
}

func setLink(t *testing.T, ns *vethns.NS, name string, up bool) {
	t.Helper()
	err := ns.Do(func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if up {
			return netlink.LinkSetUp(l)
		}
		return netlink.LinkSetDown(l)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFaultLinkFlap: the AF_XDP end's link, then the peer's, goes down
// for 300 ms under traffic both ways; traffic resumes both ways after
// each, the poller keeps running, and every frame comes back.
func TestFaultLinkFlap(t *testing.T) {
	f := newFaultBed(t, nil)
	f.allowLate = true
	f.start(30 * time.Second)
	f.waitGrowth("RX before the fault", &f.rxGot, 1000)
	f.waitGrowth("TX before the fault", &f.txGot, 1000)
	for _, end := range []*vethns.Link{f.p.A, f.p.B} {
		setLink(t, end.NS, end.Name, false)
		time.Sleep(300 * time.Millisecond)
		setLink(t, end.NS, end.Name, true)
		f.waitGrowth("RX after "+end.Name+" came back", &f.rxGot, 1000)
		f.waitGrowth("TX after "+end.Name+" came back", &f.txGot, 1000)
	}
	if err := f.stop(); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run ended with %v, want its context's error", err)
	}
	f.report()
	// Only ENETDOWN is expected, while a link is down.
	f.checkErrors(syscall.ENETDOWN)
}

// TestFaultPeerGone: the peer veth is deleted, or the peer's namespace
// removed, under traffic: the poller's Run ends with ENETDOWN, the sender
// gets errors it can match, nothing hangs and every frame comes back.
func TestFaultPeerGone(t *testing.T) {
	for _, how := range []string{"delete-veth", "remove-namespace"} {
		t.Run(how, func(t *testing.T) {
			f := newFaultBed(t, nil)
			f.allowLate = true
			f.start(30 * time.Second)
			f.waitGrowth("RX before the fault", &f.rxGot, 1000)
			f.waitGrowth("TX before the fault", &f.txGot, 1000)
			switch how {
			case "delete-veth":
				err := f.b.Do(func() error {
					l, err := netlink.LinkByName(f.p.B.Name)
					if err != nil {
						return err
					}
					return netlink.LinkDel(l)
				})
				if err != nil {
					t.Fatal(err)
				}
			case "remove-namespace":
				f.rxConn.Close() // sockets in the namespace keep it alive
				f.txConn.Close()
				if err := f.b.Close(); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-f.runErr:
				if !errors.Is(err, syscall.ENETDOWN) {
					t.Fatalf("Run ended with %v, want ENETDOWN", err)
				}
				t.Logf("Run: %v", err)
				f.runErr <- err
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not notice the interface went away")
			}
			// The sender notices too.
			deadline := time.Now().Add(5 * time.Second)
			for f.txErrs.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			e, _ := f.txErr.Load().(error)
			if !errors.Is(e, syscall.ENXIO) && !errors.Is(e, syscall.ENETDOWN) {
				t.Fatalf("sender: last error %v, want ENXIO or ENETDOWN", e)
			}
			f.stop()
			f.report()
			f.checkErrors(syscall.ENXIO, syscall.ENETDOWN)
		})
	}
}

// TestFaultRXOverflow: a handler slower than the traffic makes the kernel
// drop (counted in XDP_STATISTICS, never a hang); once it speeds up the
// poller catches up.
func TestFaultRXOverflow(t *testing.T) {
	f := newFaultBed(t, &xsk.Config{RXSize: 256, FillSize: 256})
	f.slow.Store(true)
	f.start(30 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	var st xsk.Stats
	for time.Now().Before(deadline) {
		var err error
		if st, err = f.s.Stats(); err != nil {
			t.Fatal(err)
		}
		if st.RXRingFull+st.RXFillRingEmptyDesc > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.RXRingFull+st.RXFillRingEmptyDesc == 0 {
		t.Fatalf("a slow handler made no drops: %+v", st)
	}
	f.slow.Store(false)
	f.waitGrowth("RX after the handler sped up", &f.rxGot, 2000)
	if err := f.stop(); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run ended with %v", err)
	}
	f.report()
	t.Logf("kernel drops counted: rx_ring_full %d, fill_ring_empty %d", st.RXRingFull, st.RXFillRingEmptyDesc)
}

// TestFaultSmallRings: TX and Completion rings of 64 entries under a
// sender that outruns them: backpressure, no loss, no duplicate. The
// sender keeps fewer datagrams in flight than the receiving socket and
// veth's queues hold, so no loss is what the kernel guarantees.
func TestFaultSmallRings(t *testing.T) {
	f := newFaultBed(t, &xsk.Config{TXSize: 64, CompletionSize: 64})
	f.txWindow = 200
	f.start(30 * time.Second)
	f.waitGrowth("TX through small rings", &f.txGot, 5000)
	if err := f.stop(); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run ended with %v", err)
	}
	f.report()
	f.checkErrors()
	if g := f.txGaps.Load(); g != 0 {
		t.Errorf("%d datagrams lost with small rings", g)
	}
	if f.txLast+1 != f.txGot.Load() {
		t.Errorf("received %d datagrams, the last one numbered %d", f.txGot.Load(), f.txLast)
	}
}

var _ = fmt.Sprint
var _ = os.ErrClosed

// TestFaultCloseUnderTraffic: the socket is closed by another goroutine
// while the poller receives and the sender sends: Run returns an error
// matching os.ErrClosed, the sender's sends fail with os.ErrClosed, and
// every frame comes back.
func TestFaultCloseUnderTraffic(t *testing.T) {
	f := newFaultBed(t, nil)
	f.start(30 * time.Second)
	f.waitGrowth("RX before the close", &f.rxGot, 1000)
	f.waitGrowth("TX before the close", &f.txGot, 1000)
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-f.runErr:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Run ended with %v, want os.ErrClosed", err)
		}
		t.Logf("Run: %v", err)
		f.runErr <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end after its socket closed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, _ := f.txErr.Load().(error)
		if errors.Is(e, os.ErrClosed) {
			t.Logf("sender: %v", e)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sender: last error %v, want os.ErrClosed", e)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.stop()
	f.report()
	f.checkErrors(os.ErrClosed)
}
