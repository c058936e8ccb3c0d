package rxpath_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// recycler keeps every packet and, at the end of each round, gives the
// round's frames back with Recycle in the reverse of the order they came
// in, as a forwarder gives back its completions. It checks that frames
// come back in the order given: a frame received a second time must be
// the oldest one recycled and not yet received again (frames the Poller
// takes from the allocator meanwhile are new to it: the recycled ones
// never go there while it runs).
type recycler struct {
	p     *rxpath.Poller
	u     *umem.UMEM
	fsize uint64
	got   atomic.Int64

	mu      sync.Mutex
	kept    []xsk.Desc
	back    []uint64 // the round's frames, in the order given back
	pending []uint64 // recycled and not received again, oldest first
	seen    map[uint64]bool
	again   int // frames received a second time (or more)
	errs    []error
	first   bool
	firstEr error // Recycle of a frame on the Fill ring, at the first packet
}

func (r *recycler) Receive(p *rxpath.Packet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.kept)
	r.kept = p.Keep(r.kept)
	if len(r.kept) != n+1 {
		r.errs = append(r.errs, fmt.Errorf("Keep kept %d descriptors, want 1", len(r.kept)-n))
		return
	}
	f := r.kept[n].Addr &^ (r.fsize - 1)
	if !r.first {
		// The other frames of the first refill (a fresh UMEM hands out
		// its lowest frames first) are on the Fill ring or unread on the
		// RX ring: lent, not the handler's to give back.
		r.first = true
		other := uint64(0)
		if f == 0 {
			other = r.fsize
		}
		r.firstEr = r.p.Recycle(r.u, []uint64{other})
	}
	if r.seen[f] {
		r.again++
		if len(r.pending) == 0 || r.pending[0] != f {
			r.errs = append(r.errs, fmt.Errorf("frame %#x came back out of order: recycled and not back yet, oldest first: %#x", f, r.pending[:min(len(r.pending), 8)]))
		} else {
			r.pending = r.pending[1:]
		}
	}
	r.seen[f] = true
	r.got.Add(1)
}

func (r *recycler) EndRound() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.back = r.back[:0]
	for i := len(r.kept) - 1; i >= 0; i-- {
		r.back = append(r.back, r.kept[i].Addr&^(r.fsize-1))
	}
	r.kept = r.kept[:0]
	if err := r.p.Recycle(r.u, r.back); err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.pending = append(r.pending, r.back...)
}

// waitKept waits (at most 5 s) until r has given back every frame it
// kept: the last round's frames go back at its end.
func waitKept(r *recycler) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		r.mu.Lock()
		n := len(r.kept)
		r.mu.Unlock()
		if n == 0 {
			return
		}
	}
}

// TestRecycle: frames given back with Recycle go onto the Fill ring in
// the order given, ahead of the allocator's, and come back to the handler
// in that order; while they come back, the Poller takes no frame from the
// allocator, whether it sleeps between packets or not; Recycle refuses a
// frame on the Fill ring, a frame given back already (twice in one call
// too), an address outside the UMEM, a UMEM the Poller does not use and a
// call outside Run, and an error takes none of the call's frames; every
// frame is free after the run.
func TestRecycle(t *testing.T) {
	// The poller sleeps after every empty round (IdleRounds -1), and its
	// refill before a sleep gives the Fill ring every frame it has: it
	// must take none from the allocator while the recycled frames are
	// enough. A round of at most 8 packets (Budget) and a window of 16
	// (up to 3 more from the sender's 4 flows) in flight leave the Fill
	// ring at least 64-8-7-19 frames before the round's refill, which
	// then gives back the stash (at most 7), so the ring never drops
	// below half of its 64 frames between rounds either.
	b := newBed(t, bedConfig{rx: rxpath.Config{FillFrames: 64, FillBatch: 8, CopyThreshold: -1, IdleRounds: -1, Budget: 8, Weight: 8}})
	r := &recycler{p: b.poller, u: b.u, fsize: uint64(b.u.FrameSize()), seen: map[uint64]bool{}}
	if err := b.poller.Recycle(b.u, []uint64{0}); !errors.Is(err, rxpath.ErrNotRunning) {
		t.Fatalf("Recycle before Run: %v, want ErrNotRunning", err)
	}
	stop := b.run(r)
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 4)
	// One datagram per flow first, so that the handler has given frames
	// to Recycle before the burst: until its first Recycle the Poller
	// refills as for any socket, and a first round of a full budget (a
	// slow wake-up meeting the burst) would top the ring up from the
	// allocator. Rounds of at most 4 packets leave the refill for later.
	// (The recycler's empty rounds call Recycle with no frames, which
	// tells the Poller too; the test does not rely on that.)
	const prime = 4
	if err := snd.send(1, 200, prime, &r.got, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	waitCount(&r.got, prime, 5*time.Second)
	waitKept(r)
	free0 := b.u.Accounting().Free // the Fill ring has its 64 frames
	const total = 2000 + prime
	if err := snd.send((total-prime)/4, 200, 16, &r.got, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	waitCount(&r.got, total, 5*time.Second)
	// A window of 16 in flight never takes the Fill ring below half of
	// its 64 frames: the recycled frames are enough.
	if free1 := b.u.Accounting().Free; free1 != free0 {
		t.Errorf("the allocator's free frames went from %d to %d while the recycled frames came back", free0, free1)
	}
	st, _ := b.poller.Stats()
	waitKept(r)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got.Load() != total {
		t.Fatalf("received %d of %d datagrams", r.got.Load(), total)
	}
	for _, err := range r.errs[:min(len(r.errs), 5)] {
		t.Error(err)
	}
	if len(r.errs) > 0 {
		t.Fatalf("%d errors", len(r.errs))
	}
	// 64 frames on the Fill ring, a window of 16 in flight: most frames
	// are received many times over.
	if r.again < total/2 {
		t.Errorf("only %d of %d packets came in a frame received before: the recycled frames did not come back", r.again, total)
	}
	if !errors.Is(r.firstEr, umem.ErrDoubleFree) {
		t.Errorf("Recycle of a frame on the Fill ring: %v, want umem.ErrDoubleFree", r.firstEr)
	}
	if err := b.poller.Recycle(b.u, []uint64{0}); !errors.Is(err, rxpath.ErrNotRunning) {
		t.Errorf("Recycle after Run: %v, want ErrNotRunning", err)
	}
	t.Logf("%d packets, %d in a frame received before, %d sleeps", total, r.again, st.Sleeps)

	if !rxpath.Recycles(b.poller) {
		t.Error("the run gave frames to Recycle, and no socket refills as one that recycles")
	}
	// A new Run forgets that an earlier one recycled (checked at its
	// first packet, below).
	var recycles bool

	// Errors while Run runs. The handler gives the first packet's frame
	// back before it keeps it (refused: the Poller recycles a packet not
	// kept as Receive returns), then keeps it and gives it back with an
	// address past the UMEM, then twice in one call (both refused: the
	// frame stays the handler's), then once, then again (refused); and a
	// UMEM of no socket of the Poller.
	errc := make(chan [6]error, 1)
	var once sync.Once
	fsize := uint64(b.u.FrameSize())
	stop = b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		once.Do(func() {
			recycles = rxpath.Recycles(b.poller)
			rc := b.poller.Recycle
			unkept := rc(b.u, []uint64{rxpath.FirstAddr(p) &^ (fsize - 1)})
			d := p.Keep(nil)
			if len(d) != 1 {
				t.Errorf("Keep kept %d descriptors, want 1", len(d))
				return
			}
			a := d[0].Addr &^ (fsize - 1)
			errc <- [6]error{unkept, rc(b.u, []uint64{a, b.u.Size()}), rc(b.u, []uint64{a, a}), rc(b.u, []uint64{a}), rc(b.u, []uint64{a}), rc(nil, nil)}
		})
	}))
	if err := snd.send(1, 64, 0, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var all [6]error
	select {
	case all = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("no packet reached the handler")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if recycles {
		t.Error("a new Run refills as if Recycle had given frames back in it: the earlier Run's state")
	}
	if !errors.Is(all[0], umem.ErrDoubleFree) {
		t.Errorf("Recycle of the frame of a packet not kept, in its Receive: %v, want umem.ErrDoubleFree", all[0])
	}
	errs := [5]error(all[1:])
	if !errors.Is(errs[0], umem.ErrBadAddress) {
		t.Errorf("Recycle of an address past the UMEM: %v, want umem.ErrBadAddress", errs[0])
	}
	if !errors.Is(errs[1], umem.ErrDoubleFree) {
		t.Errorf("Recycle of a frame twice in one call: %v, want umem.ErrDoubleFree", errs[1])
	}
	if errs[2] != nil {
		t.Errorf("Recycle of the frame after two refused calls: %v", errs[2])
	}
	if !errors.Is(errs[3], umem.ErrDoubleFree) {
		t.Errorf("Recycle of a frame given back already: %v, want umem.ErrDoubleFree", errs[3])
	}
	if !errors.Is(errs[4], rxpath.ErrConfig) {
		t.Errorf("Recycle with a UMEM the Poller does not use: %v, want ErrConfig", errs[4])
	}
	// bed's cleanup checks that every frame is free.
}

// TestRecycleFreeFrame: Recycle cannot see a frame that the allocator has
// free. Given one among many, with the Fill ring full, the stash
// overflows to the allocator, which refuses that frame: Run returns
// umem.ErrDoubleFree (no panic) and every other frame still reaches the
// allocator (bed's cleanup checks that every frame is free).
func TestRecycleFreeFrame(t *testing.T) {
	b := newBed(t, bedConfig{rx: rxpath.Config{FillFrames: 2048, CopyThreshold: -1}})
	fsize := uint64(b.u.FrameSize())
	var once sync.Once
	done := make(chan error, 1)
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		once.Do(func() {
			d := p.Keep(nil)
			own := make([]uint64, 1000)
			if n := b.u.GetBatch(own); n != len(own) {
				done <- fmt.Errorf("the allocator gave %d frames of %d", n, len(own))
				return
			}
			// own[100] goes back to the allocator and stays on the list:
			// beyond what the full Fill ring takes of the first stash.
			if err := b.u.Put(own[100]); err != nil {
				done <- err
				return
			}
			for _, x := range d {
				own = append(own, x.Addr&^(fsize-1))
			}
			done <- b.poller.Recycle(b.u, own)
		})
	}))
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	if err := snd.send(1, 64, 0, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Recycle: %v (it cannot see a frame the allocator has free)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no packet reached the handler")
	}
	err := stop()
	if !errors.Is(err, umem.ErrDoubleFree) {
		t.Fatalf("Run: %v, want umem.ErrDoubleFree", err)
	}
	t.Logf("Run: %v", err)
}

// TestRecycleFillFrames: a Recycle of more frames than the Poller keeps
// for a Fill ring (its stash holds Weight+MaxSegments+FillBatch) puts no
// more than Config.FillFrames on the ring; the rest go to the allocator
// (bed's cleanup checks that every frame is free).
func TestRecycleFillFrames(t *testing.T) {
	const fillFrames = 64
	b := newBed(t, bedConfig{rx: rxpath.Config{FillFrames: fillFrames, FillBatch: 8, Weight: 8, CopyThreshold: -1}})
	fsize := uint64(b.u.FrameSize())
	var once sync.Once
	done := make(chan error, 1)
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		once.Do(func() {
			own := make([]uint64, 300) // several stashes' worth
			if n := b.u.GetBatch(own); n != len(own) {
				done <- fmt.Errorf("the allocator gave %d frames of %d", n, len(own))
				return
			}
			for _, d := range p.Keep(nil) {
				own = append(own, d.Addr&^(fsize-1))
			}
			if err := b.poller.Recycle(b.u, own); err != nil {
				done <- err
				return
			}
			// Fill counts the frames on the Fill ring and those the
			// kernel moved to the RX ring that the Poller has not read.
			if a := b.u.Accounting(); a.Fill > fillFrames {
				done <- fmt.Errorf("%d frames on the Fill ring after Recycle, FillFrames is %d (%s)", a.Fill, fillFrames, a)
				return
			}
			done <- nil
		})
	}))
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	if err := snd.send(1, 64, 0, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no packet reached the handler")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRecycleAllocs: Recycle allocates nothing, also when its frames
// overflow the stash (to the Fill ring and the allocator).
func TestRecycleAllocs(t *testing.T) {
	b := newBed(t, bedConfig{rx: rxpath.Config{FillFrames: 64, FillBatch: 8, Weight: 8, CopyThreshold: -1}})
	var once sync.Once
	done := make(chan error, 1)
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		once.Do(func() {
			// 200 calls of one frame each: the stash (80 frames) is
			// flushed a few times.
			one := make([]uint64, 1)
			var err error
			allocs := testing.AllocsPerRun(200, func() {
				if b.u.GetBatch(one) != 1 {
					err = errors.New("the allocator has no frame")
				} else if e := b.poller.Recycle(b.u, one); e != nil {
					err = e
				}
			})
			if err == nil && allocs != 0 {
				err = fmt.Errorf("Recycle: %v allocations a call", allocs)
			}
			done <- err
		})
	}))
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	if err := snd.send(1, 64, 0, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no packet reached the handler")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
