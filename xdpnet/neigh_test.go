package xdpnet_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// setNeigh sets a permanent neighbour entry for ip on the server's
// interface (no traffic: the addresses are table entries only).
func (bd *bed) setNeigh(ip netip.Addr, mac net.HardwareAddr) error {
	return bd.a.Do(func() error {
		return netlink.NeighSet(&netlink.Neigh{
			LinkIndex: bd.p.A.Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: ip.AsSlice(), HardwareAddr: mac,
		})
	})
}

// waitReload waits until the conn has reloaded its neighbours since
// before (a count of Reloads).
func waitReload(t *testing.T, bd *bed, before uint64) {
	t.Helper()
	for w := time.Now().Add(10 * time.Second); bd.c.Reloads() == before; {
		if time.Now().After(w) {
			t.Fatal("the conn saw no neighbour change")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNeighbourEventKeepsRoutes: a neighbour announcement does not
// empty the route cache: the next write to a known destination asks the
// kernel for no route.
func TestNeighbourEventKeepsRoutes(t *testing.T) {
	bd := newBed(t, false, nil)
	dst := bd.p.B.AddrPort4(7000)
	if _, err := bd.c.WriteToUDPAddrPort([]byte("one"), dst); err != nil {
		t.Fatal(err)
	}
	gets := bd.c.RouteGets()
	if gets == 0 {
		t.Fatal("no route lookup for the first write")
	}
	reloads := bd.c.Reloads()
	if err := bd.setNeigh(netip.MustParseAddr("198.19.250.1"), net.HardwareAddr{0x02, 0, 0x5e, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	waitReload(t, bd, reloads)
	if _, err := bd.c.WriteToUDPAddrPort([]byte("two"), dst); err != nil {
		t.Fatal(err)
	}
	if got := bd.c.RouteGets(); got != gets {
		t.Errorf("%d route lookups after a neighbour change, want %d", got, gets)
	}
}

// TestWatcherOverflow: with the subscription's buffer at its minimum, a
// burst of neighbour changes overflows it (ENOBUFS); the conn records
// it, reloads, and still follows the changes after it.
func TestWatcherOverflow(t *testing.T) {
	bd := newBed(t, false, nil)
	if err := bd.c.SetWatchBuffer(1); err != nil { // the kernel raises it to its minimum
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x02, 0, 0x5e, 1, 2, 3}
	for burst := 0; bd.c.WatchErrors() == 0; burst++ {
		if burst == 20 {
			t.Fatal("20 bursts of 256 neighbour changes did not overflow the subscription")
		}
		err := bd.a.Do(func() error {
			for i := range 256 {
				mac[5] = byte(burst)
				err := netlink.NeighSet(&netlink.Neigh{
					LinkIndex: bd.p.A.Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
					IP: net.IPv4(198, 19, 250, byte(i)), HardwareAddr: mac,
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// After the overflow: the conn still follows the client's MAC.
	bd.echo(t)
	c := bd.dial(t)
	vethns.WaitEcho(t, c)
	newMAC := net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x20, 0x31}
	err := bd.b.Do(func() error {
		l, err := netlink.LinkByName(bd.p.B.Name)
		if err != nil {
			return err
		}
		return netlink.LinkSetHardwareAddr(l, newMAC)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bd.setNeigh(bd.p.B.IPv4.Addr(), newMAC); err != nil {
		t.Fatal(err)
	}
	vethns.WaitEcho(t, c) // replies to the old MAC address are dropped
	vethns.RoundTrips(t, c, 20)
}
