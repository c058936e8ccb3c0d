package vethns_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestSIGKILLDetaches: a process that attached the XDP program and bound
// a queue dies by SIGKILL; afterwards no program is attached and the
// queue binds again.
func TestSIGKILLDetaches(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), "XK_CHILD_NS="+a.Path(), "XK_CHILD_IF="+p.A.Name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	if !<-ready {
		cmd.Wait()
		t.Fatal("the child did not attach and bind")
	}
	attached := func() bool {
		var at bool
		if err := a.Do(func() error {
			l, err := netlink.LinkByName(p.A.Name)
			if err != nil {
				return err
			}
			at = l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return at
	}
	if !attached() {
		t.Fatal("no XDP program attached while the child runs")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	deadline := time.Now().Add(2 * time.Second)
	for attached() {
		if time.Now().After(deadline) {
			t.Fatal("the XDP program is still attached 2 s after SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = a.Do(func() error {
		u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 256})
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{BindTimeout: 2 * time.Second})
		if err != nil {
			return fmt.Errorf("bind after SIGKILL: %w", err)
		}
		return s.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLeastPrivilege: sockets, UMEM and the XDP program created on a
// thread whose effective capabilities are only CAP_NET_ADMIN, CAP_NET_RAW,
// CAP_BPF and CAP_IPC_LOCK receive and send traffic.
func TestLeastPrivilege(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	type setup struct {
		u    *umem.UMEM
		prog *xsk.Program
		s    *xsk.Socket
	}
	res := make(chan error, 1)
	var st setup
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the thread
		h, err := netns.GetFromPath(a.Path())
		if err != nil {
			res <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			res <- err
			return
		}
		if err := setEffective([]uint{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW, unix.CAP_BPF, unix.CAP_IPC_LOCK}); err != nil {
			res <- err
			return
		}
		if st.u, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096}); err != nil {
			res <- err
			return
		}
		if st.prog, err = xsk.AttachProgram(p.A.Name, &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}}}); err != nil {
			res <- err
			return
		}
		if st.s, err = xsk.New(p.A.Name, 0, st.u, nil); err != nil {
			res <- err
			return
		}
		res <- st.prog.Register(st.s)
	}()
	err := <-res
	t.Cleanup(func() {
		if st.prog != nil {
			st.prog.Close()
		}
		if st.s != nil {
			st.s.Close()
		}
		if st.u != nil {
			st.u.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	// RX: 1000 datagrams from a kernel socket in b.
	addrs := make([]uint64, 1024)
	n := st.u.GetBatch(addrs)
	st.s.Fill().Produce(addrs[:n])
	conn, err := b.DialUDP(p.B.AddrPort4(5000), p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// At most 200 in flight: below veth's 256-entry XDP ring. The Fill
	// ring holds all 1000 frames, so no refill is needed.
	var received atomic.Int64
	sendErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		deadline := time.Now().Add(10 * time.Second)
		for i := 0; i < 1000; i++ {
			for int64(i)-received.Load() >= 200 {
				if time.Now().After(deadline) {
					sendErr <- fmt.Errorf("receiver stalled at %d of 1000", received.Load())
					return
				}
				time.Sleep(20 * time.Microsecond)
			}
			if _, err := conn.Write(payload(buf, i)); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	descs := make([]xsk.Desc, 64)
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for got < 1000 && time.Now().Before(deadline) {
		k := st.s.RX().Consume(descs)
		for _, d := range descs[:k] {
			if err := st.u.Put(d.Addr); err != nil {
				t.Fatal(err)
			}
		}
		got += k
		received.Store(int64(got))
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	if got != 1000 {
		t.Fatalf("received %d of 1000 datagrams", got)
	}

	// TX: 1000 datagrams to a kernel socket in b.
	lc, err := b.ListenUDP(p.B.AddrPort4(9001))
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if err := vethns.ForceReadBuffer(lc, 8<<20); err != nil {
		t.Fatal(err)
	}
	var acked atomic.Int64
	done := make(chan error, 1)
	go func() {
		rb := make([]byte, 2048)
		for i := 0; i < 1000; i++ {
			_ = lc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := lc.Read(rb); err != nil {
				done <- fmt.Errorf("after %d: %w", i, err)
				return
			}
			acked.Add(1)
		}
		done <- nil
	}()
	txBuf := make([]byte, 2048)
	err = txFrames(st.s, 1000, 200, &acked, func(f []byte, seq int) int {
		return udpFrame(f, p.A.MAC, p.B.MAC, p.A.AddrPort4(40000), p.B.AddrPort4(9001), payload(txBuf, seq))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestXSKCloseWhileBusy: Close from another goroutine while one goroutine
// receives and another sends: no crash, both see os.ErrClosed, and the
// rings take nothing afterwards.
func TestXSKCloseWhileBusy(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	var (
		u    *umem.UMEM
		s    *xsk.Socket
		prog *xsk.Program
	)
	if err := a.Do(func() error {
		var err error
		if u, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096}); err != nil {
			return err
		}
		if s, err = xsk.New(p.A.Name, 0, u, nil); err != nil {
			return err
		}
		if prog, err = xsk.AttachProgram(p.A.Name, nil); err != nil {
			return err
		}
		return prog.Register(s)
	}); err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	defer prog.Close()
	addrs := make([]uint64, 2048)
	s.Fill().Produce(addrs[:u.GetBatch(addrs)])

	// The peer floods the socket with kernel UDP.
	conn, err := b.DialUDP(netip.AddrPort{}, p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop := make(chan struct{})
	go func() {
		msg := make([]byte, 100)
		for i := 0; i < 1_000_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			conn.Write(msg)
		}
	}()
	defer close(stop)

	errs := make(chan error, 2)
	// Loop iterations of each goroutine, to close mid-work.
	var rxBusy, txBusy atomic.Int64
	go func() { // receiver
		descs := make([]xsk.Desc, 64)
		addrs := make([]uint64, 64)
		fill := &filler{ring: s.Fill()}
		for i := 0; ; i++ {
			rxBusy.Store(int64(i))
			k := s.RX().Consume(descs)
			for j := range descs[:k] {
				addrs[j] = descs[j].Addr
			}
			fill.give(addrs[:k]...)
			if err := s.KickRX(); err != nil {
				errs <- err
				return
			}
			if i > 50_000_000 {
				errs <- fmt.Errorf("receiver never saw the close")
				return
			}
		}
	}()
	go func() { // sender: reuses frames it takes from the allocator
		descs := make([]xsk.Desc, 64)
		addrs := make([]uint64, 64)
		for i := 0; ; i++ {
			txBusy.Store(int64(i))
			c := s.Completion().Consume(addrs)
			_ = u.PutBatch(addrs[:c])
			n := u.GetBatch(addrs[:16])
			for j := 0; j < n; j++ {
				descs[j] = xsk.Desc{Addr: addrs[j], Len: 60}
			}
			k := s.TX().Produce(descs[:n])
			_ = u.PutBatch(addrs[k:n])
			if err := s.WakeTX(); err != nil {
				errs <- err
				return
			}
			if i > 50_000_000 {
				errs <- fmt.Errorf("sender never saw the close")
				return
			}
		}
	}()
	// Close once both loops are well under way.
	for deadline := time.Now().Add(10 * time.Second); rxBusy.Load() < 1000 || txBusy.Load() < 1000; {
		if time.Now().After(deadline) {
			t.Fatalf("receiver at %d, sender at %d iterations after 10 s", rxBusy.Load(), txBusy.Load())
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, os.ErrClosed) {
				t.Fatalf("after Close: %v, want os.ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a ring user hung after Close")
		}
	}
	if n := s.RX().Consume(make([]xsk.Desc, 4)); n != 0 || !s.Closed() {
		t.Fatalf("closed socket: Consume = %d, Closed = %v", n, s.Closed())
	}
}
