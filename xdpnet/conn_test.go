package xdpnet_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/xdpnet"
)

const port = 5353

// bed is a server namespace a with a conn on its end of a veth pair, and
// a client namespace b.
type bed struct {
	a, b *vethns.NS
	p    *vethns.Pair
	c    *xdpnet.UDPConn
	srv  netip.AddrPort
}

func newBed(t *testing.T, v6 bool, pc *vethns.PairConfig) *bed {
	t.Helper()
	bd, err := newBedConfig(t, v6, pc, nil, nil)
	if err != nil {
		t.Fatalf("ListenUDP: %v", err)
	}
	return bd
}

// newBedConfig is newBed with a Config, and prep run in the server's
// namespace before ListenUDP; it returns ListenUDP's error.
func newBedConfig(t *testing.T, v6 bool, pc *vethns.PairConfig, cfg *xdpnet.Config, prep func(*bed) error) (*bed, error) {
	t.Helper()
	vethns.Require(t)
	bd := &bed{a: vethns.NewNS(t), b: vethns.NewNS(t)}
	bd.p = vethns.NewPair(t, bd.a, bd.b, pc)
	bd.srv = bd.p.A.AddrPort4(port)
	if v6 {
		bd.srv = bd.p.A.AddrPort6(port)
	}
	var prepErr error
	err := bd.a.Do(func() error {
		if prep != nil {
			if prepErr = prep(bd); prepErr != nil {
				return nil
			}
		}
		var err error
		bd.c, err = xdpnet.ListenUDP(context.Background(), bd.p.A.Name, bd.srv, cfg)
		return err
	})
	if prepErr != nil {
		t.Fatalf("prepare: %v", prepErr)
	}
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := bd.c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for i, a := range bd.c.Accounting() {
			if a.Free != a.Total {
				t.Errorf("queue %d: frames not back after Close: %v", i, a)
			}
		}
	})
	return bd, nil
}

// echo serves the conn until it is closed: every datagram goes back to
// its sender.
func (bd *bed) echo(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, src, err := bd.c.ReadFromUDPAddrPort(buf)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("echo read: %v", err)
				}
				return
			}
			if _, err := bd.c.WriteToUDPAddrPort(buf[:n], src); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("echo write: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() {
		bd.c.Close()
		<-done
	})
}

func (bd *bed) dial(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := bd.b.DialUDP(netip.AddrPort{}, bd.srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends n datagrams of varied sizes and checks each reply is
// byte-exact.

// TestEcho: datagrams of 1 to 1400 bytes over IPv4 and IPv6 come back
// byte-exact from the conn, through its AF_XDP sockets (not the kernel
// socket), with checksums the client's kernel accepts, whether the client
// finishes its checksums or leaves them to offload.
func TestEcho(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			bd := newBed(t, v6, nil)
			bd.echo(t)
			for _, offload := range []bool{false, true} {
				if err := bd.b.Do(func() error { return netdev.SetTxCsumOffload(bd.p.B.Name, offload) }); err != nil {
					t.Fatal(err)
				}
				before, err := bd.b.Counters()
				if err != nil {
					t.Fatal(err)
				}
				c := bd.dial(t)
				vethns.WaitEcho(t, c)
				vethns.RoundTrips(t, c, 200)
				after, err := bd.b.Counters()
				if err != nil {
					t.Fatal(err)
				}
				vethns.SameCounters(t, fmt.Sprintf("tx-csum %v: client", offload), before, after, vethns.ChecksumCounters)
			}
			st := bd.c.Stats()
			if st.Sent < 400 || st.KernelSent != 0 || st.KernelReceived != 0 {
				t.Errorf("not all through AF_XDP: %+v", st)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	var op *net.OpError
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout() && errors.As(err, &op)
}

// TestDeadlines: the cases of the net package's deadline tests that apply
// to a packet conn.
func TestDeadlines(t *testing.T) {
	bd := newBed(t, false, nil)
	c := bd.c
	buf := make([]byte, 2048)

	// A deadline in the past fails reads and writes at once.
	c.SetDeadline(time.Now().Add(-time.Second))
	if _, _, err := c.ReadFrom(buf); !isTimeout(err) {
		t.Fatalf("read past deadline: %v", err)
	}
	if _, err := c.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(bd.p.B.AddrPort4(9))); !isTimeout(err) {
		t.Fatalf("write past deadline: %v", err)
	}
	c.SetDeadline(time.Time{})

	// A future deadline ends a blocked read no earlier than set.
	d := 50 * time.Millisecond
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	if _, _, err := c.ReadFrom(buf); !isTimeout(err) {
		t.Fatalf("read future deadline: %v", err)
	}
	if el := time.Since(start); el < d {
		t.Fatalf("read returned after %v, before its deadline %v", el, d)
	}

	// Changed while blocked: to the past wakes the reader; from none to
	// soon wakes it; extended keeps it reading.
	blocked := func(set func()) error {
		errc := make(chan error, 1)
		go func() { _, _, err := c.ReadFrom(buf); errc <- err }()
		set()
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("reader not woken by the deadline change")
			return nil
		}
	}
	c.SetReadDeadline(time.Time{})
	if err := blocked(func() { time.Sleep(20 * time.Millisecond); c.SetReadDeadline(time.Now().Add(-time.Second)) }); !isTimeout(err) {
		t.Fatalf("deadline moved to the past: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(time.Hour))
	if err := blocked(func() { c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)) }); !isTimeout(err) {
		t.Fatalf("deadline moved nearer: %v", err)
	}

	short := time.Now().Add(30 * time.Millisecond)
	c.SetReadDeadline(short)
	cl := bd.dial(t)
	err := blocked(func() {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		for time.Now().Before(short.Add(100 * time.Millisecond)) {
			time.Sleep(10 * time.Millisecond)
		}
		cl.Write([]byte("late"))
	})
	if err != nil {
		t.Fatalf("deadline extended: the read failed: %v", err)
	}
}

// TestClose: Close wakes a blocked reader with net.ErrClosed, later
// calls fail with it, and a second Close returns nil.
func TestClose(t *testing.T) {
	bd := newBed(t, true, nil)
	errc := make(chan error, 1)
	go func() { _, _, err := bd.c.ReadFrom(make([]byte, 100)); errc <- err }()
	time.Sleep(20 * time.Millisecond) // let it block (it also passes if it has not yet)
	if err := bd.c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked read after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the reader")
	}
	if _, err := bd.c.WriteToUDPAddrPort([]byte("x"), bd.p.B.AddrPort6(9)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	if err := bd.c.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetDeadline after Close: %v", err)
	}
	if err := bd.c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseUnderLoad: clients send as fast as they can while the conn
// echoes; Close in the middle returns nil with every UMEM frame back
// (newBed's cleanup checks the accounting too).
func TestCloseUnderLoad(t *testing.T) {
	bd := newBed(t, false, nil)
	bd.echo(t)
	c := bd.dial(t)
	vethns.WaitEcho(t, c)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := make([]byte, 512)
			deadline := time.Now().Add(20 * time.Second)
			for i := 0; i < 1_000_000 && time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					return
				default:
				}
				c.Write(msg)
			}
		}()
	}
	// Close once the conn has echoed a good number of datagrams.
	for w := time.Now().Add(20 * time.Second); bd.c.Stats().Sent < 2000 && time.Now().Before(w); {
		time.Sleep(time.Millisecond)
	}
	if err := bd.c.Close(); err != nil {
		t.Errorf("Close under load: %v", err)
	}
	close(stop)
	wg.Wait()
	if s := bd.c.Stats(); s.Sent < 2000 {
		t.Errorf("only %d datagrams echoed before Close", s.Sent)
	}
	for i, a := range bd.c.Accounting() {
		if a.Free != a.Total {
			t.Errorf("queue %d: %v", i, a)
		}
	}
}

// TestNeighbourChange: the client's MAC address changes mid-run (and the
// server's neighbour entry with it); replies follow the new address.
// Replies to the old one would be dropped by the client's device.
func TestNeighbourChange(t *testing.T) {
	bd := newBed(t, false, nil)
	bd.echo(t)
	c := bd.dial(t)
	vethns.WaitEcho(t, c)
	vethns.RoundTrips(t, c, 20)
	mac := net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x20, 0x30}
	reloads := bd.c.Reloads()
	err := bd.b.Do(func() error {
		l, err := netlink.LinkByName(bd.p.B.Name)
		if err != nil {
			return err
		}
		return netlink.LinkSetHardwareAddr(l, mac)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = bd.a.Do(func() error {
		return netlink.NeighSet(&netlink.Neigh{
			LinkIndex: bd.p.A.Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: bd.p.B.IPv4.Addr().AsSlice(), HardwareAddr: mac,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for w := time.Now().Add(10 * time.Second); bd.c.Reloads() == reloads; {
		if time.Now().After(w) {
			t.Fatal("the conn saw no neighbour change")
		}
		time.Sleep(time.Millisecond)
	}
	vethns.RoundTrips(t, c, 100)
	if s := bd.c.Stats(); s.KernelSent != 0 {
		t.Errorf("%d replies went through the kernel", s.KernelSent)
	}
}

// TestUnresolvedNeighbour: the server writes first to a client it has
// no neighbour entry for. That datagram goes through the kernel socket,
// which resolves the neighbour; the next ones go through AF_XDP once the
// kernel's entry is there. None is lost.
func TestUnresolvedNeighbour(t *testing.T) {
	bd := newBed(t, false, &vethns.PairConfig{NoNeigh: true})
	cl, err := bd.b.ListenUDP(bd.p.B.AddrPort4(7000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	buf := make([]byte, 100)
	for i := 0; i < 200; i++ {
		msg := []byte(fmt.Sprintf("datagram %d", i))
		if _, err := bd.c.WriteToUDPAddrPort(msg, bd.p.B.AddrPort4(7000)); err != nil {
			t.Fatal(err)
		}
		cl.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, src, err := cl.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v (%+v)", i, err, bd.c.Stats())
		}
		if !bytes.Equal(buf[:n], msg) || src != bd.srv {
			t.Fatalf("datagram %d: %q from %v", i, buf[:n], src)
		}
		if s := bd.c.Stats(); s.Sent > 0 && s.KernelSent > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("not first through the kernel, then AF_XDP: %+v", bd.c.Stats())
}

// TestFirstDatagram: a datagram sent as soon as ListenUDP has returned
// gets its reply (no probe first): no datagram is lost while the conn
// starts.
func TestFirstDatagram(t *testing.T) {
	for i := 0; i < 3; i++ {
		bd := newBed(t, i%2 == 1, nil)
		bd.echo(t)
		vethns.RoundTrips(t, bd.dial(t), 1)
	}
}
