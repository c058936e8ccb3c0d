package xsk

import (
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/xdpkit/xdpkit/umem"
)

// fakeRing lays a ring out in Go memory the way the kernel does: producer,
// consumer and flags on their own cache lines, then the entries.
type fakeRing struct {
	words []uint64
	prod  *uint32
	cons  *uint32
}

func newFake(r *ring, size uint32, entry uintptr) (fakeRing, unsafe.Pointer) {
	words := make([]uint64, 24+int(size)*int(entry)/8)
	base := unsafe.Pointer(&words[0])
	r.producer = (*uint32)(base)
	r.consumer = (*uint32)(unsafe.Add(base, 64))
	r.flags = (*uint32)(unsafe.Add(base, 128))
	r.size, r.mask = size, size-1
	r.g = &guard{}
	return fakeRing{words: words, prod: r.producer, cons: r.consumer}, unsafe.Add(base, 192)
}

func newFakeTX(size uint32) (*TXRing, fakeRing) {
	t := &TXRing{umem: testUMEM}
	f, p := newFake(&t.ring, size, sizeofDesc)
	t.descs = unsafe.Slice((*Desc)(p), size)
	t.cached = size
	return t, f
}

func newFakeRX(size uint32) (*RXRing, fakeRing) {
	r := &RXRing{umem: testUMEM}
	f, p := newFake(&r.ring, size, sizeofDesc)
	r.descs = unsafe.Slice((*Desc)(p), size)
	return r, f
}

func newFakeFill(size uint32) (*FillRing, fakeRing) {
	r := &FillRing{umem: testUMEM}
	f, p := newFake(&r.ring, size, 8)
	r.addrs = unsafe.Slice((*uint64)(p), size)
	r.cached = size
	return r, f
}

func newFakeComp(size uint32) (*CompletionRing, fakeRing) {
	r := &CompletionRing{umem: testUMEM}
	f, p := newFake(&r.ring, size, 8)
	r.addrs = unsafe.Slice((*uint64)(p), size)
	return r, f
}

// testUMEM only counts; rings never dereference frames. needUMEM creates
// it on first use, after TestMain's leak check took its baseline, and
// TestMain closes it before the check.
var testUMEM *umem.UMEM

func needUMEM(tb testing.TB) {
	tb.Helper()
	if testUMEM != nil {
		return
	}
	u, err := umem.New(&umem.Config{FrameCount: 16})
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("cannot create a UMEM: %v [CI=true: failing instead of skipping]", err)
		}
		tb.Skipf("cannot create a UMEM (not root?): %v", err)
	}
	testUMEM = u
}

func TestTXRingWrapAndFull(t *testing.T) {
	needUMEM(t)
	tx, k := newFakeTX(8)
	var descs [5]Desc
	next := uint64(0)
	kernelCons := uint32(0)
	for round := 0; round < 20; round++ {
		for i := range descs {
			descs[i] = Desc{Addr: next + uint64(i), Len: uint32(round)}
		}
		want := min(5, 8-int(*k.prod-kernelCons))
		n := tx.Produce(descs[:])
		if n != want {
			t.Fatalf("round %d: Produce = %d, want %d", round, n, want)
		}
		// The kernel consumes 3 entries and checks them.
		for i := 0; i < 3 && kernelCons != atomic.LoadUint32(k.prod); i++ {
			d := tx.descs[kernelCons&7]
			if d.Addr != uint64(kernelCons) {
				t.Fatalf("entry %d holds addr %d", kernelCons, d.Addr)
			}
			kernelCons++
		}
		atomic.StoreUint32(k.cons, kernelCons)
		next += uint64(n)
		if tx.Pending() != int(*k.prod-kernelCons) {
			t.Fatalf("Pending = %d", tx.Pending())
		}
	}
	testUMEM.Moved(umem.TX, umem.Held, int(*k.prod))
}

func TestTXRingKeepsMultiBufferWhole(t *testing.T) {
	needUMEM(t)
	tx, _ := newFakeTX(4)
	descs := []Desc{{Addr: 1}, {Addr: 2, Options: OptContd}, {Addr: 3, Options: OptContd}, {Addr: 4, Options: OptContd}, {Addr: 5}}
	if n := tx.Produce(descs); n != 1 {
		t.Fatalf("Produce split a packet: took %d", n)
	}
	if n := tx.Produce(descs[1:]); n != 0 {
		t.Fatalf("a 4-buffer packet in 3 free entries: took %d", n)
	}
	testUMEM.Moved(umem.TX, umem.Held, 1)
}

func TestRXRingConsume(t *testing.T) {
	needUMEM(t)
	rx, k := newFakeRX(8)
	var out [4]Desc
	if n := rx.Consume(out[:]); n != 0 {
		t.Fatalf("empty ring gave %d", n)
	}
	total := 0
	for round := 0; round < 10; round++ {
		// The kernel produces 6.
		p := *k.prod
		for i := uint32(0); i < 6; i++ {
			rx.descs[(p+i)&7] = Desc{Addr: uint64(p + i), Len: 60}
		}
		atomic.StoreUint32(k.prod, p+6)
		for got := 0; got < 6; {
			n := rx.Consume(out[:])
			for i := 0; i < n; i++ {
				if out[i].Addr != uint64(total) {
					t.Fatalf("got addr %d, want %d", out[i].Addr, total)
				}
				total++
			}
			got += n
			if n == 0 {
				t.Fatal("ring stalled")
			}
		}
		if *k.cons != *k.prod {
			t.Fatalf("consumer %d, producer %d", *k.cons, *k.prod)
		}
	}
	testUMEM.Moved(umem.Held, umem.Fill, total)
}

func TestFillCompletion(t *testing.T) {
	needUMEM(t)
	fill, fk := newFakeFill(4)
	comp, ck := newFakeComp(4)
	addrs := []uint64{10, 20, 30, 40, 50}
	if n := fill.Produce(addrs); n != 4 {
		t.Fatalf("Fill.Produce = %d", n)
	}
	if fill.Free() != 0 || fill.Len() != 4 {
		t.Fatalf("Free %d Len %d", fill.Free(), fill.Len())
	}
	atomic.StoreUint32(fk.cons, 2)
	if fill.Free() != 2 {
		t.Fatalf("after the kernel took 2: Free %d", fill.Free())
	}
	*(*uint32)(unsafe.Pointer(fill.flags)) = xdpRingNeedWakeup
	if !fill.NeedWakeup() {
		t.Fatal("need_wakeup not seen")
	}
	comp.addrs[0], comp.addrs[1] = 7, 8
	atomic.StoreUint32(ck.prod, 2)
	out := make([]uint64, 8)
	if n := comp.Consume(out); n != 2 || out[0] != 7 || out[1] != 8 {
		t.Fatalf("Completion.Consume = %d %v", n, out[:2])
	}
	testUMEM.Moved(umem.Fill, umem.Held, 4)
	testUMEM.Moved(umem.Held, umem.TX, 2)
}

// BenchmarkTXProduceRXConsume moves batches of 64 descriptors through a
// TX ring and an RX ring with the kernel's side played by plain index
// updates: the cost of reserve/submit and peek/release per frame.
func BenchmarkRings(b *testing.B) {
	needUMEM(b)
	b.Run("tx-produce", func(b *testing.B) {
		tx, k := newFakeTX(2048)
		descs := make([]Desc, 64)
		b.ReportAllocs()
		for b.Loop() {
			if tx.Produce(descs) != 64 {
				b.Fatal("ring full")
			}
			atomic.StoreUint32(k.cons, atomic.LoadUint32(k.prod))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/frame")
		testUMEM.Moved(umem.TX, umem.Held, b.N*64)
	})
	b.Run("rx-consume", func(b *testing.B) {
		rx, k := newFakeRX(2048)
		descs := make([]Desc, 64)
		b.ReportAllocs()
		for b.Loop() {
			atomic.StoreUint32(k.prod, atomic.LoadUint32(k.prod)+64)
			if rx.Consume(descs) != 64 {
				b.Fatal("ring empty")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/frame")
		testUMEM.Moved(umem.Held, umem.Fill, b.N*64)
	})
	b.Run("fill-produce", func(b *testing.B) {
		fill, k := newFakeFill(2048)
		addrs := make([]uint64, 64)
		b.ReportAllocs()
		for b.Loop() {
			fill.Produce(addrs)
			atomic.StoreUint32(k.cons, atomic.LoadUint32(k.prod))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/frame")
		testUMEM.Moved(umem.Fill, umem.Held, b.N*64)
	})
	b.Run("comp-consume", func(b *testing.B) {
		comp, k := newFakeComp(2048)
		addrs := make([]uint64, 64)
		b.ReportAllocs()
		for b.Loop() {
			atomic.StoreUint32(k.prod, atomic.LoadUint32(k.prod)+64)
			comp.Consume(addrs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/frame")
		testUMEM.Moved(umem.Held, umem.TX, b.N*64)
	})
}
