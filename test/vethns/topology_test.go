package vethns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// nsInode returns the inode of a namespace file.
func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

func TestNS(t *testing.T) {
	Require(t)
	ns := NewNS(t)

	if !strings.HasPrefix(ns.Name, fmt.Sprintf("xk-%d-", os.Getpid())) {
		t.Errorf("name %q lacks the xk-<pid>- prefix", ns.Name)
	}
	target := nsInode(t, ns.Path())

	// The caller's thread stays where it is; f runs in ns.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := nsInode(t, "/proc/thread-self/ns/net")
	if before == target {
		t.Fatal("test thread already in the new namespace")
	}
	var inside uint64
	if err := ns.Do(func() error {
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
			return err
		}
		inside = st.Ino
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inside != target {
		t.Errorf("Do ran f in namespace inode %d, want %d", inside, target)
	}
	if after := nsInode(t, "/proc/thread-self/ns/net"); after != before {
		t.Errorf("caller's thread moved from namespace %d to %d", before, after)
	}

	// Errors from f come back unchanged.
	errF := errors.New("from f")
	if err := ns.Do(func() error { return errF }); !errors.Is(err, errF) {
		t.Errorf("Do returned %v, want %v", err, errF)
	}

	// Loopback is up and the only link.
	err := ns.Do(func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		if len(links) != 1 || links[0].Attrs().Name != "lo" || links[0].Attrs().Flags&(1<<0) == 0 {
			return fmt.Errorf("links in a new namespace: %+v, want lo up", links)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}

	// ip netns exec finds it.
	if _, err := exec.LookPath("ip"); err == nil {
		out, err := ns.Exec(context.Background(), "ip", "-o", "link", "show")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out, []byte("lo:")) || bytes.Count(out, []byte("\n")) != 1 {
			t.Errorf("ip link inside %s: %q", ns.Name, out)
		}
	}

	c, err := ns.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Ip:InReceives", "Udp:InCsumErrors", "Tcp:InCsumErrors", "Udp6:InCsumErrors", "TcpExt:TCPTimeouts"} {
		if _, ok := c[k]; !ok {
			t.Errorf("Counters lacks %s", k)
		}
	}

	// Close is idempotent, and Do afterwards says so.
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := ns.Do(func() error { return nil }); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Do after Close: %v, want os.ErrClosed", err)
	}
	if _, err := os.Stat(ns.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Close: %v, want it gone", ns.Path(), err)
	}
}

func TestTopology(t *testing.T) {
	Require(t)

	t.Run("pair", func(t *testing.T) {
		a, b := NewNS(t), NewNS(t)
		p := NewPair(t, a, b, nil)
		checkPair(t, p, 1, 1500, true)
		ping(t, p)
		udpExchange(t, p)
	})

	t.Run("multiqueue", func(t *testing.T) {
		a, b := NewNS(t), NewNS(t)
		p := NewPair(t, a, b, &PairConfig{Queues: 4, MTU: 3000})
		checkPair(t, p, 4, 3000, true)
		for _, l := range []*Link{p.A, p.B} {
			out, err := l.NS.Exec(context.Background(), "ls", "/sys/class/net/"+l.Name+"/queues")
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Fields(string(out))
			want := []string{"rx-0", "rx-1", "rx-2", "rx-3", "tx-0", "tx-1", "tx-2", "tx-3"}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: queues %v, want %v", l.Name, got, want)
			}
		}
		ping(t, p)
	})

	t.Run("same-namespace-noneigh", func(t *testing.T) {
		a := NewNS(t)
		p := NewPair(t, a, a, &PairConfig{NoNeigh: true})
		checkPair(t, p, 1, 1500, false)
	})

	t.Run("bad-config", func(t *testing.T) {
		a := NewNS(t)
		for _, c := range []PairConfig{{Queues: -1}, {Queues: 5000}, {MTU: 10}} {
			if _, err := CreatePair(a, a, &c); !errors.Is(err, ErrBadConfig) {
				t.Errorf("CreatePair(%+v): %v, want ErrBadConfig", c, err)
			}
		}
	})

	t.Run("cleanup", func(t *testing.T) {
		outer := NewNS(t)
		var inner *NS
		var p *Pair
		t.Run("inner", func(t *testing.T) {
			inner = NewNS(t)
			p = NewPair(t, outer, inner, nil)
			// A failing test cleans up too; a subtest that fails would
			// fail the parent, so only the path is exercised here.
		})
		if _, err := os.Stat(inner.Path()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after the test's cleanup (%v)", inner.Path(), err)
		}
		if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err == nil && bytes.Contains(out, []byte(inner.Name)) {
			t.Errorf("ip netns list still shows %s", inner.Name)
		}
		// The veth end in the surviving namespace goes with its peer
		// (the kernel destroys the namespace asynchronously).
		deadline := time.Now().Add(5 * time.Second)
		for {
			var found bool
			err := outer.Do(func() error {
				_, err := netlink.LinkByName(p.A.Name)
				var nf netlink.LinkNotFoundError
				if errors.As(err, &nf) {
					return nil
				}
				found = err == nil
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still in %s 5s after its peer's namespace was deleted", p.A.Name, outer.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("pair-close", func(t *testing.T) {
		a, b := NewNS(t), NewNS(t)
		p, err := CreatePair(a, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		err = b.Do(func() error {
			_, err := netlink.LinkByName(p.B.Name)
			return err
		})
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			t.Errorf("peer %s after Pair.Close: %v, want not found", p.B.Name, err)
		}
	})
}

// checkPair verifies both ends as the kernel sees them from inside their
// namespaces.
func checkPair(t *testing.T, p *Pair, queues, mtu int, neigh bool) {
	t.Helper()
	v4 := netip.MustParsePrefix("198.18.0.0/15")
	v6 := netip.MustParsePrefix("2001:db8::/32")
	for _, e := range []struct{ self, peer *Link }{{p.A, p.B}, {p.B, p.A}} {
		l := e.self
		if len(l.Name) > 15 {
			t.Errorf("name %q longer than 15", l.Name)
		}
		if !v4.Contains(l.IPv4.Addr()) || l.IPv4.Bits() != 30 || !v6.Contains(l.IPv6.Addr()) || l.IPv6.Bits() != 64 {
			t.Errorf("%s: addresses %v %v outside the test ranges", l.Name, l.IPv4, l.IPv6)
		}
		err := l.NS.Do(func() error {
			link, err := netlink.LinkByName(l.Name)
			if err != nil {
				return err
			}
			at := link.Attrs()
			if link.Type() != "veth" || at.Index != l.Index || !bytes.Equal(at.HardwareAddr, l.MAC) {
				return fmt.Errorf("%s: type %s index %d mac %s, want veth %d %s", l.Name, link.Type(), at.Index, at.HardwareAddr, l.Index, l.MAC)
			}
			if at.NumRxQueues != queues || at.NumTxQueues != queues || at.MTU != mtu {
				return fmt.Errorf("%s: %d rx %d tx queues mtu %d, want %d %d %d", l.Name, at.NumRxQueues, at.NumTxQueues, at.MTU, queues, queues, mtu)
			}
			if at.OperState != netlink.OperUp {
				return fmt.Errorf("%s: operstate %v", l.Name, at.OperState)
			}
			addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
			if err != nil {
				return err
			}
			var has4, has6 bool
			for _, a := range addrs {
				ap, _ := netip.AddrFromSlice(a.IP)
				ones, _ := a.Mask.Size()
				switch netip.PrefixFrom(ap.Unmap(), ones) {
				case l.IPv4:
					has4 = true
				case l.IPv6:
					has6 = a.Flags&unix.IFA_F_TENTATIVE == 0
				}
			}
			if !has4 || !has6 {
				return fmt.Errorf("%s: addresses %v lack %v or a non-tentative %v", l.Name, addrs, l.IPv4, l.IPv6)
			}
			b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + l.Name + "/accept_dad")
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(b)) != "0" {
				return fmt.Errorf("%s: accept_dad %q", l.Name, b)
			}
			neighs, err := netlink.NeighList(l.Index, netlink.FAMILY_ALL)
			if err != nil {
				return err
			}
			var perm int
			for _, n := range neighs {
				ip, _ := netip.AddrFromSlice(n.IP)
				ip = ip.Unmap()
				if n.State == netlink.NUD_PERMANENT && bytes.Equal(n.HardwareAddr, e.peer.MAC) &&
					(ip == e.peer.IPv4.Addr() || ip == e.peer.IPv6.Addr()) {
					perm++
				}
			}
			if neigh && perm != 2 {
				return fmt.Errorf("%s: %d permanent neighbour entries for the peer, want 2: %+v", l.Name, perm, neighs)
			}
			if !neigh && perm != 0 {
				return fmt.Errorf("%s: NoNeigh but %d permanent entries", l.Name, perm)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	if p.A.IPv4.Masked() != p.B.IPv4.Masked() || p.A.IPv6.Masked() != p.B.IPv6.Masked() || p.A.IPv4 == p.B.IPv4 {
		t.Errorf("ends not in one subnet: %v %v / %v %v", p.A.IPv4, p.B.IPv4, p.A.IPv6, p.B.IPv6)
	}
}

func ping(t *testing.T, p *Pair) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dst := range []netip.Addr{p.B.IPv4.Addr(), p.B.IPv6.Addr()} {
		if err := p.A.NS.Ping(ctx, dst, 1, 2*time.Second); err != nil {
			t.Error(err)
		}
	}
	if err := p.B.NS.Ping(ctx, p.A.IPv6.Addr(), 1, 2*time.Second); err != nil {
		t.Errorf("ping back: %v", err)
	}
}

// udpExchange sends one datagram each way over IPv4 and IPv6 with
// ListenUDP/DialUDP and checks the receiver's counters moved.
func udpExchange(t *testing.T, p *Pair) {
	t.Helper()
	before, err := p.B.NS.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, dst := range []netip.AddrPort{p.B.AddrPort4(40000), p.B.AddrPort6(40001)} {
		ln, err := p.B.NS.ListenUDP(dst)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := p.A.NS.DialUDP(netip.AddrPort{}, dst)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg := []byte("hello " + dst.String())
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		ln.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 100)
		n, from, err := ln.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Errorf("got %q, want %q", buf[:n], msg)
		}
		if src := from.Addr().Unmap(); src != p.A.IPv4.Addr() && src != p.A.IPv6.Addr() {
			t.Errorf("datagram from %v, want one of A's addresses", from)
		}
		// Reply on the same socket pair.
		if _, err := ln.WriteToUDPAddrPort([]byte("pong"), from); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "pong" {
			t.Errorf("reply: %q, %v", buf[:n], err)
		}
	}
	after, err := p.B.NS.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Udp:InDatagrams", "Udp6:InDatagrams"} {
		if after[k] != before[k]+1 {
			t.Errorf("%s in %s: %d -> %d, want +1", k, p.B.NS.Name, before[k], after[k])
		}
	}
}
