package xdpprog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/xdpkit/xdpkit/test/vethns"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	vethns.Exclusive()
	os.Exit(vethns.LeakCheck(m))
}

// Values of IFLA_XDP_ATTACHED.
const (
	xdpAttachedDrv = 1
	xdpAttachedSKB = 2
)

func countFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
}

// xdpState reads the XDP attachment of ifindex inside ns.
func xdpState(tb testing.TB, ns *vethns.NS, ifindex int) *netlink.LinkXdp {
	tb.Helper()
	var x *netlink.LinkXdp
	err := ns.Do(func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		x = l.Attrs().Xdp
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if x == nil {
		x = &netlink.LinkXdp{}
	}
	return x
}

// pair builds two namespaces joined by a veth pair.
func pair(tb testing.TB, cfg *vethns.PairConfig) (a, b *vethns.NS, p *vethns.Pair) {
	tb.Helper()
	vethns.Require(tb)
	a, b = vethns.NewNS(tb), vethns.NewNS(tb)
	return a, b, vethns.NewPair(tb, a, b, cfg)
}

func TestAttachDetach(t *testing.T) {
	_, nsB, pr := pair(t, nil)
	for _, tc := range []struct {
		mode     Mode
		want     Mode
		attached uint32
	}{
		{ModeNative, ModeNative, xdpAttachedDrv},
		{ModeGeneric, ModeGeneric, xdpAttachedSKB},
		{ModeAuto, ModeNative, xdpAttachedDrv}, // veth has native XDP
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			fds := countFDs(t)
			err := nsB.Do(func() error {
				p, err := Load(&Config{Filter: &Filter{IPv4UDP: true}})
				if err != nil {
					return err
				}
				defer p.Close()
				got, err := p.Attach(pr.B.Index, tc.mode)
				if err != nil {
					return err
				}
				if got != tc.want {
					t.Errorf("Attach(%v) = %v, want %v", tc.mode, got, tc.want)
				}
				if m, ok := p.Mode(); !ok || m != tc.want {
					t.Errorf("Mode() = %v, %v", m, ok)
				}
				if p.Frags() {
					t.Errorf("Frags() = true at MTU 1500")
				}
				x := xdpState(t, nsB, pr.B.Index)
				if !x.Attached || x.AttachMode != tc.attached {
					t.Errorf("after Attach: %+v, want attached in mode %d", x, tc.attached)
				}
				info, err := p.prog.Info()
				if err != nil {
					return err
				}
				if id, _ := info.ID(); uint32(id) != x.ProgId {
					t.Errorf("attached prog id %d, ours %d", x.ProgId, id)
				}
				if _, err := p.Attach(pr.B.Index, tc.mode); !errors.Is(err, ErrAttached) {
					t.Errorf("second Attach: %v, want ErrAttached", err)
				}
				// A second program on the same interface: busy.
				q, err := Load(nil)
				if err != nil {
					return err
				}
				defer q.Close()
				if _, err := q.Attach(pr.B.Index, tc.mode); !errors.Is(err, ErrBusy) {
					t.Errorf("Attach of a second program: %v, want ErrBusy", err)
				}
				if err := p.Close(); err != nil {
					return fmt.Errorf("Close: %w", err)
				}
				if err := p.Close(); err != nil {
					return fmt.Errorf("second Close: %w", err)
				}
				if _, ok := p.Mode(); ok {
					t.Errorf("Mode() reports an attachment after Close")
				}
				if x := xdpState(t, nsB, pr.B.Index); x.Attached {
					t.Errorf("after Close: %+v, still attached", x)
				}
				// The interface is free again.
				if _, err := q.Attach(pr.B.Index, tc.mode); err != nil {
					t.Errorf("Attach after the first program closed: %v", err)
				}
				return q.Close()
			})
			if err != nil {
				t.Fatal(err)
			}
			if x := xdpState(t, nsB, pr.B.Index); x.Attached {
				t.Errorf("at the end: %+v, still attached", x)
			}
			if d := countFDs(t) - fds; d != 0 {
				t.Errorf("%d file descriptors leaked", d)
			}
		})
	}
}

// TestAttachCycles attaches and closes repeatedly and checks that no file
// descriptor (program, map, link) is left behind.
func TestAttachCycles(t *testing.T) {
	_, nsB, pr := pair(t, nil)
	var before, after int
	err := nsB.Do(func() error {
		cycle := func(mode Mode) error {
			p, err := Load(&Config{Filter: &Filter{DstPorts: []uint16{53}}})
			if err != nil {
				return err
			}
			if _, err := p.Attach(pr.B.Index, mode); err != nil {
				p.Close()
				return err
			}
			return p.Close()
		}
		if err := cycle(ModeNative); err != nil { // warm up cilium/ebpf's probes
			return err
		}
		before = countFDs(t)
		for i := range 50 {
			mode := ModeNative
			if i%2 == 1 {
				mode = ModeGeneric
			}
			if err := cycle(mode); err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
		}
		after = countFDs(t)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("50 attach/close cycles: %d file descriptors before, %d after", before, after)
	}
	if x := xdpState(t, nsB, pr.B.Index); x.Attached {
		t.Errorf("still attached: %+v", x)
	}
}

func TestAttachNoInterface(t *testing.T) {
	vethns.Require(t)
	ns := vethns.NewNS(t)
	err := ns.Do(func() error {
		p, err := Load(nil)
		if err != nil {
			return err
		}
		defer p.Close()
		for _, idx := range []int{0, -1, 1 << 30} {
			for _, mode := range []Mode{ModeAuto, ModeNative, ModeGeneric} {
				_, err := p.Attach(idx, mode)
				if !errors.Is(err, ErrNoInterface) {
					t.Errorf("Attach(%d, %v): %v, want ErrNoInterface", idx, mode, err)
				} else {
					t.Logf("Attach(%d, %v): %v", idx, mode, err)
				}
			}
		}
		if _, err := p.Attach(1, Mode(42)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Attach with Mode(42): %v, want ErrInvalidConfig", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAttachJumboFrags: at MTU 9000 a native attach needs a multi-buffer
// program; Attach must find that out by itself.
func TestAttachJumboFrags(t *testing.T) {
	_, nsB, pr := pair(t, &vethns.PairConfig{MTU: 9000})
	fds := countFDs(t)
	err := nsB.Do(func() error {
		for _, mode := range []Mode{ModeNative, ModeAuto} {
			p, err := Load(&Config{Filter: &Filter{IPv4UDP: true}})
			if err != nil {
				return err
			}
			got, err := p.Attach(pr.B.Index, mode)
			if err != nil {
				p.Close()
				return fmt.Errorf("Attach(%v) at MTU 9000: %w", mode, err)
			}
			if got != ModeNative || !p.Frags() {
				t.Errorf("Attach(%v) at MTU 9000: mode %v, frags %v; want native with frags", mode, got, p.Frags())
			}
			x := xdpState(t, nsB, pr.B.Index)
			info, err := p.prog.Info()
			if err != nil {
				p.Close()
				return err
			}
			if id, _ := info.ID(); !x.Attached || x.AttachMode != xdpAttachedDrv || uint32(id) != x.ProgId {
				t.Errorf("attached %+v, want our program %d in driver mode", x, id)
			}
			if err := p.Close(); err != nil {
				return err
			}
		}

		// Generic mode takes the single-buffer program at any MTU.
		p, err := Load(nil)
		if err != nil {
			return err
		}
		defer p.Close()
		if got, err := p.Attach(pr.B.Index, ModeGeneric); err != nil || got != ModeGeneric || p.Frags() {
			t.Errorf("generic attach at MTU 9000: %v, %v, frags %v", got, err, p.Frags())
		}
		if err := p.Close(); err != nil {
			return err
		}

		// Asked for explicitly.
		p, err = Load(&Config{Frags: true})
		if err != nil {
			return err
		}
		defer p.Close()
		if !p.Frags() {
			t.Errorf("Config.Frags: Frags() = false")
		}
		if got, err := p.Attach(pr.B.Index, ModeNative); err != nil || got != ModeNative {
			t.Errorf("native attach of a frags program: %v, %v", got, err)
		}
		return p.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	if x := xdpState(t, nsB, pr.B.Index); x.Attached {
		t.Errorf("still attached: %+v", x)
	}
	if d := countFDs(t) - fds; d != 0 {
		t.Errorf("%d file descriptors leaked", d)
	}
}

// ping sends an ICMP echo from ns a to addr and reports whether the reply
// came back within a second.
func ping(t *testing.T, a *vethns.NS, addr netip.Addr) (bool, string) {
	t.Helper()
	err := a.Ping(context.Background(), addr, 1, time.Second)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	return err == nil, fmt.Sprint(err)
}

// TestPingThroughFilter attaches with a UDP filter and an (unbound) socket
// in the XSKMAP: a packet the program redirected would be dropped (the
// redirect into an unbound socket fails), so ping working with the filter,
// and failing without it, shows that ARP, ND and ICMP took the XDP_PASS path.
func TestPingThroughFilter(t *testing.T) {
	for _, mode := range []Mode{ModeNative, ModeGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			nsA, nsB, pr := pair(t, &vethns.PairConfig{NoNeigh: true})
			attach := func(f *Filter) *Program {
				t.Helper()
				var p *Program
				err := nsB.Do(func() error {
					var err error
					p, err = Load(&Config{Filter: f})
					if err != nil {
						return err
					}
					if err := p.Register(0, unboundXSK(t)); err != nil {
						p.Close()
						return err
					}
					if _, err := p.Attach(pr.B.Index, mode); err != nil {
						p.Close()
						return err
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}

			p := attach(&Filter{IPv4UDP: true, IPv6UDP: true, IPv4TCP: true, IPv6TCP: true})
			for _, addr := range []netip.Addr{pr.B.IPv4.Addr(), pr.B.IPv6.Addr()} {
				if ok, out := ping(t, nsA, addr); !ok {
					t.Errorf("ping %v through the filter failed:\n%s", addr, out)
				}
			}
			// UDP is redirected (into the unbound socket: dropped), except
			// to a PassDst address.
			if got := udpReaches(t, nsA, nsB, pr.B.AddrPort4(9000)); got {
				t.Errorf("UDP reached the kernel socket although the filter redirects it")
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}

			p = attach(&Filter{IPv4UDP: true, PassDst: []netip.Addr{pr.B.IPv4.Addr()}})
			if got := udpReaches(t, nsA, nsB, pr.B.AddrPort4(9000)); !got {
				t.Errorf("UDP to a PassDst address did not reach the kernel socket")
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}

			p = attach(&Filter{DstPorts: []uint16{9001}})
			if got := udpReaches(t, nsA, nsB, pr.B.AddrPort6(9000)); !got {
				t.Errorf("UDP to port 9000 did not reach the kernel with a filter on port 9001")
			}
			if got := udpReaches(t, nsA, nsB, pr.B.AddrPort6(9001)); got {
				t.Errorf("UDP to port 9001 reached the kernel socket although the filter redirects it")
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}

			// Control: without a filter everything is redirected and lost.
			p = attach(nil)
			if ok, out := ping(t, nsA, pr.B.IPv4.Addr()); ok {
				t.Errorf("ping worked with every packet redirected into an unbound socket:\n%s", out)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			// And after Close the path is clean again.
			if ok, out := ping(t, nsA, pr.B.IPv4.Addr()); !ok {
				t.Errorf("ping after Close failed:\n%s", out)
			}
			if x := xdpState(t, nsB, pr.B.Index); x.Attached {
				t.Errorf("still attached: %+v", x)
			}
		})
	}
}

// udpReaches sends up to 4 datagrams from ns a to dst (in ns b) and reports
// whether a kernel socket there received one (within 0.6 s in all).
func udpReaches(t *testing.T, a, b *vethns.NS, dst netip.AddrPort) bool {
	t.Helper()
	srv, err := b.ListenUDP(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := a.DialUDP(netip.AddrPort{}, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	buf := make([]byte, 64)
	for i := range 4 {
		if _, err := cl.Write([]byte(fmt.Sprintf("xdpprog %d", i))); err != nil {
			t.Fatal(err)
		}
		srv.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
		n, err := srv.Read(buf)
		if err == nil && strings.HasPrefix(string(buf[:n]), "xdpprog ") {
			return true
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Fatal(err)
		}
	}
	return false
}

// TestQueueIndex runs the program with the context of a real 4-queue veth
// (ingress_ifindex, rx_queue_index) and a socket registered at queue 2
// only: only queue 2 redirects.
func TestQueueIndex(t *testing.T) {
	_, nsB, pr := pair(t, &vethns.PairConfig{Queues: 4})
	err := nsB.Do(func() error {
		p, err := Load(&Config{MaxQueues: 4})
		if err != nil {
			return err
		}
		defer p.Close()
		if err := p.Register(2, unboundXSK(t)); err != nil {
			return err
		}
		in := udp4(dstV4, 9).bytes()
		for q := uint32(0); q < 4; q++ {
			ret, err := p.prog.Run(&ebpf.RunOptions{
				Data:    in,
				Context: xdpMD{DataEnd: uint32(len(in)), IngressIfindex: uint32(pr.B.Index), RxQueueIndex: q},
				Repeat:  1,
			})
			if err != nil {
				return fmt.Errorf("queue %d: %w", q, err)
			}
			want := uint32(retPass)
			if q == 2 {
				want = retRedirect
			}
			if ret != want {
				t.Errorf("rx queue %d: %s, want %s", q, retName(ret), retName(want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dropCaps empties the effective capability set of the calling thread,
// which must be locked to it (ns.Do's threads are); permitted is kept, so
// restore can raise them again.
func dropCaps(t *testing.T) (restore func() error) {
	t.Helper()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var saved, dropped [2]unix.CapUserData
	if err := unix.Capget(&hdr, &saved[0]); err != nil {
		t.Fatalf("capget: %v", err)
	}
	dropped = saved
	dropped[0].Effective, dropped[1].Effective = 0, 0
	if err := unix.Capset(&hdr, &dropped[0]); err != nil {
		t.Fatalf("capset: %v", err)
	}
	return func() error { return unix.Capset(&hdr, &saved[0]) }
}

func TestMissingCapabilities(t *testing.T) {
	_, nsB, pr := pair(t, nil)
	// Load once with privileges so cilium/ebpf's feature probes are cached.
	p := load(t, nil)
	err := nsB.Do(func() error {
		restore := dropCaps(t)
		q, loadErr := Load(nil)
		// BPF_LINK_CREATE for XDP checks no capability on this kernel:
		// holding the program's fd is enough. Record what happens.
		mode, attachErr := p.Attach(pr.B.Index, ModeAuto)
		if err := restore(); err != nil {
			// Do cannot switch this thread back either: it is discarded.
			return fmt.Errorf("restore capabilities: %w", err)
		}
		if q != nil {
			q.Close()
		}
		checkCapErr(t, "Load", loadErr, "CAP_BPF")
		if attachErr != nil {
			checkCapErr(t, "Attach", attachErr, "CAP_NET_ADMIN")
		} else {
			t.Logf("Attach without capabilities succeeded (%v): the kernel checks none for BPF_LINK_CREATE", mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if x := xdpState(t, nsB, pr.B.Index); x.Attached {
		t.Errorf("attached after Close: %+v", x)
	}
}

func checkCapErr(t *testing.T, op string, err error, capName string) {
	t.Helper()
	var ce *CapabilityError
	if !errors.As(err, &ce) || !errors.Is(err, ErrPermission) || !errors.Is(err, os.ErrPermission) {
		t.Errorf("%s without capabilities: %v (%T), want a *CapabilityError matching ErrPermission and os.ErrPermission", op, err, err)
		return
	}
	if !strings.Contains(err.Error(), capName) {
		t.Errorf("%s without capabilities: %q does not name %s", op, err, capName)
	}
	t.Logf("%s without capabilities: %v", op, err)
}
