package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestMain(m *testing.M) {
	vethns.Exclusive()
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

// TestServer queries the server in its namespace with miekg/dns's client
// from the peer's, over xdpnet and over the kernel, IPv4 and IPv6: each
// answer carries the zone's records and rcode.
func TestServer(t *testing.T) {
	for _, xdp := range []bool{true, false} {
		for _, v6 := range []bool{false, true} {
			t.Run(fmt.Sprintf("xdp=%v/v6=%v", xdp, v6), func(t *testing.T) {
				vethns.Require(t)
				a, b := vethns.NewNS(t), vethns.NewNS(t)
				p := vethns.NewPair(t, a, b, nil)
				addr := p.A.AddrPort4(53)
				if v6 {
					addr = p.A.AddrPort6(53)
				}
				var pc net.PacketConn
				if err := a.Do(func() (err error) {
					pc, err = listen(context.Background(), p.A.Name, addr, xdp)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				srv := &dns.Server{PacketConn: pc, Handler: newHandler()}
				served := make(chan error, 1)
				go func() { served <- srv.ActivateAndServe() }()
				defer func() {
					if err := srv.Shutdown(); err != nil {
						t.Error(err)
					}
					if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
						t.Error(err)
					}
				}()

				c, err := b.DialUDP(netip.AddrPort{}, addr)
				if err != nil {
					t.Fatal(err)
				}
				co := &dns.Conn{Conn: c}
				defer co.Close()
				for _, tc := range []struct {
					name  string
					qtype uint16
					rcode int
					n     int
				}{
					{"www.example.test.", dns.TypeA, dns.RcodeSuccess, 1},
					{"WWW.example.test.", dns.TypeAAAA, dns.RcodeSuccess, 1},
					{"example.test.", dns.TypeMX, dns.RcodeSuccess, 1},
					{"ftp.example.test.", dns.TypeA, dns.RcodeNameError, 0},
					{"www.example.org.", dns.TypeA, dns.RcodeRefused, 0},
				} {
					m := new(dns.Msg).SetQuestion(tc.name, tc.qtype)
					r, err := exchange(co, m)
					if err != nil {
						t.Fatalf("%s %s: %v", tc.name, dns.TypeToString[tc.qtype], err)
					}
					if r.Id != m.Id || r.Rcode != tc.rcode || len(r.Answer) != tc.n {
						t.Fatalf("%s %s: %v", tc.name, dns.TypeToString[tc.qtype], r)
					}
				}
			})
		}
	}
}

// exchange sends m and reads its answer, retrying a few times if none
// comes.
func exchange(co *dns.Conn, m *dns.Msg) (*dns.Msg, error) {
	var err error
	for i := 0; i < 5; i++ {
		co.SetDeadline(time.Now().Add(2 * time.Second))
		if err = co.WriteMsg(m); err != nil {
			continue
		}
		var r *dns.Msg
		if r, err = co.ReadMsg(); err == nil {
			return r, nil
		}
	}
	return nil, err
}
