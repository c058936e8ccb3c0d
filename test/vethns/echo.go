package vethns

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// WaitEcho sends probes on c, a UDP socket connected to an echo server,
// until the server sends one back unchanged; tb fails when none came back.
// Bounded: 50 probes, 100 ms apart. Before an echo server's XDP program is
// attached the peer kernel answers with ICMP port unreachable, which
// shows up here as a read error and another probe.
func WaitEcho(tb testing.TB, c *net.UDPConn) {
	tb.Helper()
	probe := echoProbe
	buf := make([]byte, 64)
	for range 50 {
		next := time.Now().Add(100 * time.Millisecond)
		// A write or read error is an ICMP error of an earlier probe
		// (ECONNREFUSED): the server is not up yet.
		if _, err := c.Write(probe); err == nil {
			c.SetReadDeadline(next)
			if n, err := c.Read(buf); err == nil && bytes.Equal(buf[:n], probe) {
				c.SetReadDeadline(time.Time{})
				return
			}
		}
		time.Sleep(time.Until(next))
	}
	tb.Fatal("the echo server did not answer in 5 s")
}

// echoProbe is WaitEcho's probe. No datagram of RoundTrips equals it.
var echoProbe = []byte("probe")

// RoundTrips sends n datagrams on c, connected to an echo server, one at
// a time: datagram i has 1+(i*97)%1400 bytes of a pattern that depends on
// i. tb fails unless each comes back byte-exact within 10 s. Replies to
// WaitEcho's probes are skipped: a slow server answers a probe after
// WaitEcho has sent the next one, so more replies can follow the one
// WaitEcho took.
func RoundTrips(tb testing.TB, c *net.UDPConn, n int) {
	tb.Helper()
	req := make([]byte, 1400)
	buf := make([]byte, 2048)
	for i := 0; i < n; i++ {
		req = req[:1+(i*97)%1400]
		for j := range req {
			req[j] = byte(i + j*7)
		}
		if _, err := c.Write(req); err != nil {
			tb.Fatalf("%v: request %d: %v", c.RemoteAddr(), i, err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, err := c.Read(buf)
		for err == nil && bytes.Equal(buf[:m], echoProbe) {
			m, err = c.Read(buf)
		}
		if err != nil {
			tb.Fatalf("%v: reply %d (%d bytes): %v", c.RemoteAddr(), i, len(req), err)
		}
		if !bytes.Equal(buf[:m], req) {
			tb.Fatalf("%v: reply %d: %d bytes, not the %d sent", c.RemoteAddr(), i, m, len(req))
		}
	}
	c.SetReadDeadline(time.Time{})
}

// ChecksumCounters are the counters ([NS.Counters]) of a receiving
// kernel that a datagram with a wrong checksum or a malformed header
// moves.
var ChecksumCounters = []string{"Udp:InCsumErrors", "Udp6:InCsumErrors", "Ip:InHdrErrors", "Udp:InErrors", "Udp6:InErrors"}

// SameCounters fails tb (without stopping it) for each of keys whose
// value differs between before and after, naming who counted.
func SameCounters(tb testing.TB, who string, before, after map[string]int64, keys []string) {
	tb.Helper()
	for _, k := range keys {
		if after[k] != before[k] {
			tb.Errorf("%s's %s went from %d to %d", who, k, before[k], after[k])
		}
	}
}
