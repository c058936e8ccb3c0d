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
	probe := []byte("probe")
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
