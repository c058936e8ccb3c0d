package xsk

import (
	"sync/atomic"
	"testing"

	"github.com/xdpkit/xdpkit/umem"
)

// TestRXRingPeek: peeked entries stay with the consumer (the consumer
// index does not move, so a full ring stays full) until Release, and a
// later Peek with skip reads on from where the last one stopped.
func TestRXRingPeek(t *testing.T) {
	needUMEM(t)
	rx, k := newFakeRX(8)
	var out [8]Desc
	if n := rx.Peek(out[:], 0); n != 0 {
		t.Fatalf("empty ring: Peek gave %d", n)
	}
	produce := func(n uint32) {
		p := *k.prod
		for i := uint32(0); i < n; i++ {
			rx.descs[(p+i)&7] = Desc{Addr: uint64(p + i), Len: 60}
		}
		atomic.StoreUint32(k.prod, p+n)
	}
	produce(8) // the ring is full
	seen := 0
	for seen < 8 {
		n := rx.Peek(out[:3], seen)
		if n == 0 {
			t.Fatalf("Peek stalled after %d of 8", seen)
		}
		for i := 0; i < n; i++ {
			if out[i].Addr != uint64(seen+i) {
				t.Fatalf("peek %d: addr %d", seen+i, out[i].Addr)
			}
		}
		seen += n
		if *k.cons != 0 {
			t.Fatalf("Peek moved the consumer index to %d", *k.cons)
		}
	}
	if n := rx.Peek(out[:], 8); n != 0 {
		t.Fatalf("Peek past the last entry gave %d", n)
	}
	if n := rx.Release(5); n != 5 || *k.cons != 5 {
		t.Fatalf("Release(5) = %d, consumer %d", n, *k.cons)
	}
	produce(5)
	if n := rx.Peek(out[:], 3); n != 5 || out[0].Addr != 8 {
		t.Fatalf("after Release: Peek(skip 3) = %d, first addr %d", n, out[0].Addr)
	}
	if n := rx.Release(100); n != 8 || *k.cons != 13 {
		t.Fatalf("Release(100) = %d, consumer %d; want 8, 13", n, *k.cons)
	}
	if n := rx.Consume(out[:]); n != 0 {
		t.Fatalf("Consume after releasing everything gave %d", n)
	}
	testUMEM.Moved(umem.Held, umem.Fill, 13)
}
