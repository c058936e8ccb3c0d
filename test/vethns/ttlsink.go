package vethns

import (
	"net"
	"net/netip"
	"sync"
	"testing"

	"golang.org/x/net/ipv4"
)

// TTLSink is a kernel UDP socket in a namespace that counts the datagrams
// it receives by the IPv4 TTL they arrived with (IP_RECVTTL): the kernel
// delivers a datagram only with a valid IPv4 header checksum, so the
// counts show both the TTL a router left and that its checksum update
// was right.
type TTLSink struct {
	c    *net.UDPConn
	done chan struct{}
	mu   sync.Mutex
	ttls map[int]uint64
}

// NewTTLSink listens on at in ns, with an 8 MiB receive buffer, until
// Stop or the end of the test.
func NewTTLSink(t testing.TB, ns *NS, at netip.AddrPort) *TTLSink {
	t.Helper()
	c, err := ns.ListenUDP(at)
	if err != nil {
		t.Fatal(err)
	}
	if err := ForceReadBuffer(c, 8<<20); err != nil {
		c.Close()
		t.Fatal(err)
	}
	pc := ipv4.NewPacketConn(c)
	if err := pc.SetControlMessage(ipv4.FlagTTL, true); err != nil {
		c.Close()
		t.Fatal(err)
	}
	s := &TTLSink{c: c, done: make(chan struct{}), ttls: map[int]uint64{}}
	go func() {
		defer close(s.done)
		buf := make([]byte, 2048)
		for {
			_, cm, _, err := pc.ReadFrom(buf)
			if err != nil {
				return // closed
			}
			s.mu.Lock()
			if cm != nil {
				s.ttls[cm.TTL]++
			} else {
				s.ttls[-1]++
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.Stop() })
	return s
}

// Stop closes the socket and returns the counts by TTL (-1: no TTL given).
func (s *TTLSink) Stop() map[int]uint64 {
	s.c.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttls
}
