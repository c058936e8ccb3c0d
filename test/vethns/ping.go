package vethns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Ping sends count ICMP echo requests (IPv4 or IPv6, after dst) from a raw
// ICMP socket inside ns, one after the other, and returns nil when a reply
// to each came back from dst within wait; it needs no ping binary
// (CAP_NET_RAW instead). A missing reply is an error wrapping
// os.ErrDeadlineExceeded.
func (ns *NS) Ping(ctx context.Context, dst netip.Addr, count int, wait time.Duration) error {
	network, laddr, proto := "ip4:icmp", "0.0.0.0", 1
	var req, reply icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	if dst.Is6() && !dst.Is4In6() {
		network, laddr, proto = "ip6:ipv6-icmp", "::", 58
		req, reply = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	dst = dst.Unmap()
	var c *icmp.PacketConn
	if err := ns.Do(func() error {
		var err error
		c, err = icmp.ListenPacket(network, laddr)
		return err
	}); err != nil {
		return fmt.Errorf("vethns: ping socket in %s: %w", ns.Name, err)
	}
	defer c.Close()
	id := int(rand.Uint32() & 0xffff)
	buf := make([]byte, 1500)
	for seq := range count {
		msg := icmp.Message{Type: req, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("xdpkit vethns")}}
		b, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
		if err != nil {
			return err
		}
		if _, err := c.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return fmt.Errorf("vethns: ping %s from %s: %w", dst, ns.Name, err)
		}
		deadline := time.Now().Add(wait)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err := c.SetReadDeadline(deadline); err != nil {
			return err
		}
		for {
			n, peer, err := c.ReadFrom(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("vethns: ping %s from %s: no reply to echo %d: %w", dst, ns.Name, seq, err)
			}
			if err != nil {
				return fmt.Errorf("vethns: ping %s from %s: %w", dst, ns.Name, err)
			}
			m, err := icmp.ParseMessage(proto, buf[:n])
			if err != nil || m.Type != reply {
				continue // the raw socket sees every ICMP message in ns
			}
			e, ok := m.Body.(*icmp.Echo)
			ip, _ := peer.(*net.IPAddr)
			if !ok || ip == nil || e.ID != id || e.Seq != seq {
				continue
			}
			if a, _ := netip.AddrFromSlice(ip.IP); a.Unmap() != dst {
				continue
			}
			break
		}
	}
	return nil
}
