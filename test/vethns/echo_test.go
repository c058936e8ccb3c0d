package vethns_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestEchoLateProbe runs WaitEcho and RoundTrips against a kernel UDP echo
// server that answers the first probe only after the second one came: the
// reply to the second probe is still queued when WaitEcho returns, and
// RoundTrips must skip it rather than take it for its first reply.
func TestEchoLateProbe(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	srv, err := a.ListenUDP(p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { srv.Close(); <-done }()
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		var held []byte // the first probe, until a second datagram came
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if held == nil && bytes.Equal(buf[:n], []byte("probe")) {
				held = append([]byte(nil), buf[:n]...)
				continue
			}
			if len(held) > 0 {
				srv.WriteToUDPAddrPort(held, from)
				held = held[:0] // not nil: the first probe is taken
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	c, err := b.DialUDP(netip.AddrPort{}, p.A.AddrPort4(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vethns.WaitEcho(t, c)
	vethns.RoundTrips(t, c, 5)
}
