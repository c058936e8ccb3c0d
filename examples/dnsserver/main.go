// Command dnsserver is an authoritative DNS server for the zone
// example.test, built on github.com/miekg/dns, that serves over a UDP
// socket of package xdpnet (AF_XDP) or, with -xdp=false, of the kernel.
// As root, Linux 5.10 or later, on an address of the interface:
//
//	go run ./examples/dnsserver -dev eth0 -addr 198.18.0.1:53
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/netip"
	"os/signal"
	"strings"
	"syscall"

	"github.com/miekg/dns"

	"github.com/xdpkit/xdpkit/xdpnet"
)

// zone is what the server answers for; other names in it get NXDOMAIN,
// names outside it REFUSED.
const zone = `$ORIGIN example.test.
$TTL 3600
@    IN SOA ns1 hostmaster 1 7200 3600 1209600 3600
@    IN NS  ns1
ns1  IN A    198.18.0.1
www  IN A    198.18.0.80
www  IN AAAA 2001:db8::80
mail IN A    198.18.0.25
@    IN MX   10 mail
`

func main() {
	dev := flag.String("dev", "eth0", "interface (with -xdp)")
	addr := flag.String("addr", "198.18.0.1:53", "address and port to serve on")
	xdp := flag.Bool("xdp", true, "serve over xdpnet (AF_XDP); false: the kernel's UDP socket")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pc, err := listen(ctx, *dev, netip.MustParseAddrPort(*addr), *xdp)
	if err != nil {
		log.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: newHandler()}
	go func() { <-ctx.Done(); srv.Shutdown() }()
	if err := srv.ActivateAndServe(); err != nil && ctx.Err() == nil {
		log.Fatal(err) // ActivateAndServe closes pc when it returns
	}
}

// listen opens the server's socket, on a thread in the interface's
// network namespace.
func listen(ctx context.Context, dev string, addr netip.AddrPort, xdp bool) (net.PacketConn, error) {
	if xdp {
		return xdpnet.ListenUDP(ctx, dev, addr, nil)
	}
	return net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
}

// newHandler answers from the zone's records.
func newHandler() dns.Handler {
	records := map[dns.Question][]dns.RR{}
	names := map[string]bool{}
	zp := dns.NewZoneParser(strings.NewReader(zone), "", "")
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		q := dns.Question{Name: h.Name, Qtype: h.Rrtype, Qclass: h.Class}
		records[q] = append(records[q], rr)
		names[h.Name] = true
	}
	if err := zp.Err(); err != nil {
		log.Fatal(err)
	}
	soa := records[dns.Question{Name: "example.test.", Qtype: dns.TypeSOA, Qclass: dns.ClassINET}]
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if len(r.Question) != 1 || !dns.IsSubDomain("example.test.", dns.CanonicalName(r.Question[0].Name)) {
			m.Authoritative = false
			m.Rcode = dns.RcodeRefused
		} else {
			q := r.Question[0]
			q.Name = dns.CanonicalName(q.Name)
			m.Answer = records[q]
			if !names[q.Name] {
				m.Rcode = dns.RcodeNameError
			}
			if len(m.Answer) == 0 {
				m.Ns = soa
			}
		}
		w.WriteMsg(m)
	})
}
