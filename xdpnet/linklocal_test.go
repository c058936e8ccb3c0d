package xdpnet_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/xdpnet"
)

// TestLinkLocal: ListenUDP takes the interface's IPv6 link-local address
// with or without its zone, and reports it with the interface as its
// zone. (No traffic: the test bed's traffic stays on 2001:db8::/32.)
func TestLinkLocal(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	var ll netip.Addr
	for w := time.Now().Add(10 * time.Second); !ll.IsValid(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(w) {
			t.Fatalf("%s has no link-local address", p.A.Name)
		}
		err := a.Do(func() error {
			l, err := netlink.LinkByIndex(p.A.Index)
			if err != nil {
				return err
			}
			addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
			for _, x := range addrs {
				if ip, ok := netip.AddrFromSlice(x.IP); ok && ip.IsLinkLocalUnicast() {
					ll = ip
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range []netip.Addr{ll, ll.WithZone(p.A.Name)} {
		err := a.Do(func() error {
			c, err := xdpnet.ListenUDP(context.Background(), p.A.Name, netip.AddrPortFrom(addr, port), nil)
			if err != nil {
				return err
			}
			if got, want := c.AddrPort(), netip.AddrPortFrom(ll.WithZone(p.A.Name), port); got != want {
				t.Errorf("AddrPort %v, want %v", got, want)
			}
			if got := c.LocalAddr().String(); got != netip.AddrPortFrom(ll.WithZone(p.A.Name), port).String() {
				t.Errorf("LocalAddr %v", got)
			}
			return c.Close()
		})
		if err != nil {
			t.Errorf("ListenUDP(%v): %v", addr, err)
		}
	}
}
