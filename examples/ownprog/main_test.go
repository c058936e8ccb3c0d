package main

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/xsk"
)

func TestMain(m *testing.M) {
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

const port = 9000

type server struct {
	cancel context.CancelFunc
	done   chan result
}

type result struct {
	st  Stats
	err error
}

func start(t *testing.T, ns *vethns.NS, ifname string, replace bool) *server {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a test that fails early stops it too
	s := &server{cancel: cancel, done: make(chan result, 1)}
	go func() {
		var r result
		r.err = ns.Do(func() error {
			var err error
			r.st, err = run(ctx, ifname, 0, port, replace)
			return err
		})
		s.done <- r
	}()
	return s
}

// stop ends the server and returns its counters.
func (s *server) stop(t *testing.T) Stats {
	t.Helper()
	s.cancel()
	r := <-s.done
	if r.err != nil && !errors.Is(r.err, context.Canceled) {
		t.Errorf("run: %v", r.err)
	}
	return r.st
}

// refused waits (at most 10 s) for run to end on its own and returns its
// error; it stops a server that keeps running.
func (s *server) refused(t *testing.T) error {
	t.Helper()
	select {
	case r := <-s.done:
		return r.err
	case <-time.After(10 * time.Second):
		s.stop(t)
		return errors.New("the server started")
	}
}

// xdpProg returns the id of the XDP program attached to ifname, 0 if none.
func xdpProg(t *testing.T, ns *vethns.NS, ifname string) uint32 {
	t.Helper()
	var id uint32
	err := ns.Do(func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			id = x.ProgId
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// echo sends n datagrams of different sizes to dst from ns and checks
// that each comes back byte-exact.
func echo(t *testing.T, ns *vethns.NS, dst netip.AddrPort, n int) {
	t.Helper()
	c, err := ns.DialUDP(netip.AddrPort{}, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vethns.WaitEcho(t, c)
	vethns.RoundTrips(t, c, n)
}

// TestOwnProgram runs the example on end A of a veth pair: datagrams to
// the port, over IPv4 and IPv6, go through the user's program and its
// XSKMAP to xdpkit's socket and come back byte-exact; a datagram to
// another port goes to the kernel's socket. The program's counters agree,
// and after the server stops the interface has no program left.
func TestOwnProgram(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	kernel, err := a.ListenUDP(p.A.AddrPort4(port + 1))
	if err != nil {
		t.Fatal(err)
	}
	defer kernel.Close()

	srv := start(t, a, p.A.Name, false)
	const n = 100
	echo(t, b, p.A.AddrPort4(port), n)
	echo(t, b, p.A.AddrPort6(port), n)

	c, err := b.DialUDP(netip.AddrPort{}, p.A.AddrPort4(port+1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("to the kernel")); err != nil {
		t.Fatal(err)
	}
	kernel.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	if k, err := kernel.Read(buf); err != nil || string(buf[:k]) != "to the kernel" {
		t.Errorf("the kernel's socket on port %d: %q, %v", port+1, buf[:k], err)
	}

	st := srv.stop(t)
	// At least the echoed datagrams and one probe per family were
	// redirected; at least the datagram to the kernel was passed.
	if st.Redirected < 2*n+2 || st.Passed < 1 {
		t.Errorf("program counters %+v, want at least %d redirected and 1 passed", st, 2*n+2)
	}
	if id := xdpProg(t, a, p.A.Name); id != 0 {
		t.Errorf("XDP program %d still attached after the server stopped", id)
	}
}

// passProgram loads an XDP program that passes everything: "another
// program" already on the interface.
func passProgram(t *testing.T) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R0, 2), // XDP_PASS
		asm.Return(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// TestOtherProgram: with another program on the interface the example
// refuses with xsk.ErrBusy and leaves it there; with -replace it replaces
// one attached through netlink (and the interface has no program after
// it stops), and still refuses one held by a bpf_link.
func TestOtherProgram(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	other := passProgram(t)
	info, err := other.Info()
	if err != nil {
		t.Fatal(err)
	}
	otherID, _ := info.ID()

	// Through netlink, generic mode, as ip link set dev X xdpgeneric would.
	err = a.Do(func() error {
		l, err := netlink.LinkByName(p.A.Name)
		if err != nil {
			return err
		}
		return netlink.LinkSetXdpFdWithFlags(l, other.FD(), unix.XDP_FLAGS_SKB_MODE)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Do(func() error {
			l, err := netlink.LinkByName(p.A.Name)
			if err == nil {
				netlink.LinkSetXdpFdWithFlags(l, -1, unix.XDP_FLAGS_SKB_MODE)
			}
			return err
		})
	})
	srv := start(t, a, p.A.Name, false)
	if err := srv.refused(t); !errors.Is(err, xsk.ErrBusy) {
		t.Fatalf("with a netlink program attached: %v, want xsk.ErrBusy", err)
	}
	if id := xdpProg(t, a, p.A.Name); id != uint32(otherID) {
		t.Fatalf("after the refusal the interface has program %d, want the other one, %d", id, otherID)
	}

	srv = start(t, a, p.A.Name, true)
	echo(t, b, p.A.AddrPort4(port), 20)
	if id := xdpProg(t, a, p.A.Name); id == uint32(otherID) || id == 0 {
		t.Errorf("with -replace the interface has program %d (the other one is %d)", id, otherID)
	}
	srv.stop(t)
	if id := xdpProg(t, a, p.A.Name); id != 0 {
		t.Errorf("program %d attached after the replacing server stopped", id)
	}

	// Through a bpf_link: nobody else can replace it.
	var l link.Link
	err = a.Do(func() error {
		var err error
		l, err = link.AttachXDP(link.XDPOptions{Program: other, Interface: p.A.Index})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv = start(t, a, p.A.Name, true)
	if err := srv.refused(t); !errors.Is(err, xsk.ErrBusy) {
		t.Fatalf("-replace with a bpf_link program attached: %v, want xsk.ErrBusy", err)
	}
	if id := xdpProg(t, a, p.A.Name); id != uint32(otherID) {
		t.Errorf("after the refusal the interface has program %d, want the bpf_link's, %d", id, otherID)
	}
}
