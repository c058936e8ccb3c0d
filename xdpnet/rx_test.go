package xdpnet

import (
	"net/netip"
	"testing"
)

// TestIdleQueueGivesBack: a queue's handler that took free slots of the
// read buffer for a round gives back those it did not fill when the
// round ends, so that a queue that falls idle holds none.
func TestIdleQueueGivesBack(t *testing.T) {
	var q rxQueue
	q.init(100, 64)
	var c counters
	local := netip.MustParseAddrPort("198.18.0.1:53")
	hs := []*handler{newHandler(&q, local, false, &c), newHandler(&q, local, false, &c)}
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
