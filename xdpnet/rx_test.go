package xdpnet

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
)

// TestIdleQueueGivesBack: a queue's handler that took free slots of the
// read buffer for a round gives back those it did not fill when the
// round ends, so that a queue that falls idle holds none.
func TestIdleQueueGivesBack(t *testing.T) {
	var q rxQueue
	q.init(100, 64)
	var c counters
	local := netip.MustParseAddrPort("198.18.0.1:53")
	hs := []*handler{newHandler(&q, local, "eth0", false, &c), newHandler(&q, local, "eth0", false, &c)}
	for _, h := range hs {
		if h.CopyBuffer(60) == nil {
			t.Fatal("no free slot")
		}
		h.EndRound()
	}
	if got := len(q.free); got != 100 {
		t.Errorf("%d of 100 slots free after the rounds, the rest held by idle queues", got)
	}
	for _, h := range hs {
		h.EndRound() // an empty round changes nothing
		h.release()
	}
	if got := len(q.free); got != 100 {
		t.Errorf("%d of 100 slots free after release", got)
	}
}

// TestRetryDelay: the kernel reader's wait after failed reads starts
// short, never shrinks while failures go on, and is bounded.
func TestRetryDelay(t *testing.T) {
	prev := time.Duration(0)
	for n := range 100 {
		d := retryDelay(n)
		if d < prev || d <= 0 || d > time.Second {
			t.Fatalf("retryDelay(%d) = %v after %v", n, d, prev)
		}
		prev = d
	}
	if retryDelay(0) > 10*time.Millisecond || prev != time.Second {
		t.Errorf("retryDelay from %v to %v, want at most 10ms to 1s", retryDelay(0), prev)
	}
}

// TestWithZone: link-local IPv6 addresses without a zone get the
// interface's; others stay as they are.
func TestWithZone(t *testing.T) {
	for in, want := range map[string]string{
		"fe80::1":      "fe80::1%eth0",
		"fe80::1%eth1": "fe80::1%eth1",
		"2001:db8::1":  "2001:db8::1",
		"198.18.0.1":   "198.18.0.1",
	} {
		if got := withZone(netip.MustParseAddr(in), "eth0"); got.String() != want {
			t.Errorf("withZone(%s) = %v, want %s", in, got, want)
		}
	}
}

// TestUncopiedNotDropped: a multi-buffer frame counts as MultiBuffer; a
// frame that finds no free slot counts as Dropped.
func TestUncopiedNotDropped(t *testing.T) {
	var q rxQueue
	q.init(1, 64)
	var c counters
	h := newHandler(&q, netip.MustParseAddrPort("198.18.0.1:53"), "eth0", false, &c)
	h.Receive(&rxpath.Packet{Segments: [][]byte{make([]byte, 64), make([]byte, 64)}})
	if c.uncopied.Load() != 1 || c.dropped.Load() != 0 {
		t.Errorf("multi-buffer frame: uncopied %d, dropped %d", c.uncopied.Load(), c.dropped.Load())
	}
	q.free = q.free[:0] // the read buffer is full
	if h.CopyBuffer(60) != nil {
		t.Fatal("a slot from a full read buffer")
	}
	h.Receive(&rxpath.Packet{Segments: [][]byte{make([]byte, 60)}})
	if c.uncopied.Load() != 1 || c.dropped.Load() != 1 {
		t.Errorf("frame with no free slot: uncopied %d, dropped %d", c.uncopied.Load(), c.dropped.Load())
	}
}
