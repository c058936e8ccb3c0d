package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestMain(m *testing.M) {
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

const port = 9000

// TestEcho runs the echo server on end A of a veth pair and sends
// datagrams of 1 to 1400 bytes from end B, over IPv4 and IPv6, with B's
// tx-checksumming on (the requests carry only the pseudo-header sum) and
// off. Every reply must come back byte-exact, from the server's address
// and port, with checksums the client's kernel accepts (it drops and
// counts a datagram whose checksum is wrong). After cancel the server
// returns and the interface has no XDP program left.
func TestEcho(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Do(func() error { return run(ctx, p.A.Name, 0, port) }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
		err := a.Do(func() error {
			l, err := netlink.LinkByName(p.A.Name)
			if err != nil {
				return err
			}
			if x := l.Attrs().Xdp; x != nil && x.Attached {
				return fmt.Errorf("XDP program %d still attached after the server stopped", x.ProgId)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}()

	for _, offload := range []bool{false, true} {
		if err := b.Do(func() error { return netdev.SetTxCsumOffload(p.B.Name, offload) }); err != nil {
			t.Fatalf("tx-checksumming %v on the client: %v", offload, err)
		}
		for _, dst := range []netip.AddrPort{p.A.AddrPort4(port), p.A.AddrPort6(port)} {
			t.Run(fmt.Sprintf("%v/tx-csum-%v", dst.Addr(), offload), func(t *testing.T) {
				before, err := b.Counters()
				if err != nil {
					t.Fatal(err)
				}
				c, err := b.DialUDP(netip.AddrPort{}, dst)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				vethns.WaitEcho(t, c)
				vethns.RoundTrips(t, c, 200)
				after, err := b.Counters()
				if err != nil {
					t.Fatal(err)
				}
				vethns.SameCounters(t, "client", before, after, vethns.ChecksumCounters)
			})
		}
	}
}
