package nt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type impl struct {
	name    string
	present bool          // the CPU has it
	force   func() func() // select it; returns the restore function
}

// eachImpl runs f once per implementation the CPU has, forced. One the CPU
// lacks cannot run here: it is named in the log, not skipped (a skip would
// fail CI on every machine without AVX-512, and a CPU's instruction set is
// not a regression). One the CPU has is always tested: implementations()
// reports presence from CPUID, the same flags Copy chooses by.
func eachImpl(t *testing.T, f func(t *testing.T)) {
	tested := 0
	for _, im := range implementations() {
		if !im.present {
			t.Logf("CPU lacks %s: that implementation cannot run here", im.name)
			continue
		}
		tested++
		t.Run(im.name, func(t *testing.T) {
			defer im.force()()
			if got := implName(); got != im.name {
				t.Fatalf("forced %s, got %s", im.name, got)
			}
			f(t)
		})
	}
	if tested == 0 {
		t.Fatal("no implementation present")
	}
}

const guard = 64 + 7 // guard bytes either side of every destination

// arena is a destination buffer with guard bytes either side, filled with a
// byte (0xA5) that no source byte equals.
type arena struct {
	buf, fill []byte
	start     int // where the last dst began
}

func newArena(n int) *arena {
	a := &arena{buf: make([]byte, n+2*64+2*guard)}
	a.fill = bytes.Repeat([]byte{0xA5}, len(a.buf))
	return a
}

// dst refills the arena and returns n bytes of it starting off (0..63) bytes
// after a 64-byte boundary, with at least guard bytes either side.
func (a *arena) dst(n, off int) []byte {
	copy(a.buf, a.fill)
	a.start = guard + headLen(a.buf[guard:]) + off
	return a.buf[a.start : a.start+n : a.start+n]
}

// check verifies that the last dst equals want and that no byte of the
// arena outside it changed.
func (a *arena) check(t *testing.T, want []byte, what string) {
	t.Helper()
	d := a.buf[a.start : a.start+len(want)]
	if !bytes.Equal(d, want) {
		i := 0
		for d[i] == want[i] {
			i++
		}
		t.Fatalf("%s: dst differs from src at byte %d of %d", what, i, len(d))
	}
	end := a.start + len(want)
	if !bytes.Equal(a.buf[:a.start], a.fill[:a.start]) || !bytes.Equal(a.buf[end:], a.fill[end:]) {
		t.Fatalf("%s: a byte outside dst [%d,%d) was written", what, a.start, end)
	}
}

func source(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 4))
	b := make([]byte, n+64)
	for i := range b {
		b[i] = byte(r.Uint32())
		if b[i] == 0xA5 {
			b[i] = 0x5A
		}
	}
	return b
}

// TestCopyNTLengths copies every length 0..4096 at every destination
// alignment 0..63 (source alignment varying with the length) with each
// implementation's NT path, which Copy takes from minNT bytes on.
func TestCopyNTLengths(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		const maxLen = 4096
		srcBuf := source(maxLen, 1)
		a := newArena(maxLen)
		for n := 0; n <= maxLen; n++ {
			so := (n * 13) & 63
			src := srcBuf[so : so+n]
			for do := 0; do < 64; do++ {
				d := a.dst(n, do)
				copyNT(d, src)
				a.check(t, src, fmt.Sprintf("len %d dst align %d src align %d", n, do, so))
			}
		}
	})
}

// TestCopyNTAlignments copies lengths around the 64-byte line and the
// 256-byte unrolled loop at every pair of source and destination alignments.
func TestCopyNTAlignments(t *testing.T) {
	lens := []int{0, 1, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 319, 320, 383, 384, 511, 512, 575, 1000, 1500, 2047, 4095, 4096}
	eachImpl(t, func(t *testing.T) {
		srcBuf := source(4096+64, 2)
		a := newArena(4096)
		for _, n := range lens {
			for so := 0; so < 64; so++ {
				for do := 0; do < 64; do++ {
					src := srcBuf[so : so+n]
					d := a.dst(n, do)
					copyNT(d, src)
					a.check(t, src, fmt.Sprintf("len %d dst align %d src align %d", n, do, so))
				}
			}
		}
	})
}

// TestCopyLarge copies large lengths through Copy and through the NT path.
func TestCopyLarge(t *testing.T) {
	lens := []int{64 << 10, 1<<20 + 13, 3<<20 + 77, 8 << 20}
	eachImpl(t, func(t *testing.T) {
		srcBuf := source(8<<20+64, 3)
		a := newArena(8 << 20)
		for _, n := range lens {
			for _, al := range [][2]int{{0, 0}, {1, 0}, {0, 33}, {63, 17}} {
				src := srcBuf[al[1] : al[1]+n]
				d := a.dst(n, al[0])
				if got := Copy(d, src); got != n {
					t.Fatalf("Copy returned %d, want %d", got, n)
				}
				Fence()
				a.check(t, src, fmt.Sprintf("Copy len %d aligns %v", n, al))
			}
		}
	})
}

// TestCopyLikeBuiltin checks Copy against the builtin copy: the count, short
// destinations and sources, nil and empty slices, and overlapping slices.
func TestCopyLikeBuiltin(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		src := source(8192, 4)[:8192]
		for _, c := range []struct{ dn, sn int }{{0, 0}, {0, 100}, {100, 0}, {100, 5000}, {5000, 100}, {300, 8000}, {8000, 300}, {4097, 4097}} {
			want := bytes.Repeat([]byte{0xA5}, c.dn)
			nw := copy(want, src[:c.sn])
			got := bytes.Repeat([]byte{0xA5}, c.dn)
			if n := Copy(got, src[:c.sn]); n != nw {
				t.Errorf("Copy(len %d, len %d) = %d, copy gives %d", c.dn, c.sn, n, nw)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Copy(len %d, len %d): content differs from copy", c.dn, c.sn)
			}
		}
		if n := Copy(nil, src); n != 0 {
			t.Errorf("Copy(nil, src) = %d", n)
		}
		if n := Copy(src, nil); n != 0 {
			t.Errorf("Copy(src, nil) = %d", n)
		}
		// Overlap, both directions, like memmove.
		for _, shift := range []int{-700, -64, -1, 0, 1, 64, 700} {
			base := source(8192, 5)[:8192]
			want := bytes.Clone(base)
			lo := 2048
			copy(want[lo+shift:lo+shift+4096], want[lo:lo+4096])
			got := bytes.Clone(base)
			if n := Copy(got[lo+shift:lo+shift+4096], got[lo:lo+4096]); n != 4096 {
				t.Fatalf("overlapping Copy returned %d", n)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("overlapping Copy, shift %d: differs from copy", shift)
			}
		}
	})
}

// TestCopyRandom compares Copy with copy for random lengths and offsets,
// with the NT cut-over lowered to 0 so the NT path sees small copies too.
func TestCopyRandom(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		old := minNT
		minNT = 0
		defer func() { minNT = old }()
		r := rand.New(rand.NewPCG(6, 6))
		srcBuf := source(1<<16, 6)
		a := newArena(1 << 16)
		for range 3000 {
			n := r.IntN(1 << 16)
			if r.IntN(2) == 0 {
				n = r.IntN(1024)
			}
			so := r.IntN(64)
			d := a.dst(n, r.IntN(64))
			if got := Copy(d, srcBuf[so:so+n]); got != n {
				t.Fatalf("Copy returned %d, want %d", got, n)
			}
			a.check(t, srcBuf[so:so+n], fmt.Sprintf("len %d", n))
		}
	})
}

// TestPublishAfterFence runs the pattern the package documents: a producer
// pinned to one CPU Copies a batch of buffers into a ring, Fences, then
// publishes the batch by storing its producer index; a consumer pinned to
// another CPU checks every word it was given. Every buffer holds words
// that name its sequence number, so a slot whose NT stores are not yet
// visible (it still holds the previous lap's bytes) is caught. The index is
// stored with an ordinary MOV (publish, outside the race detector): a
// locked instruction such as atomic.Store's XCHG would order the NT stores
// by itself and hide a missing Fence. Checked by breaking the producer:
// publishing before the copies fails every run; deleting the Fence failed
// some runs only on the development VM (the window in which NT stores
// are not yet visible is short), so a pass does not prove the fence.
func TestPublishAfterFence(t *testing.T) {
	cpus, err := twoCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs 2 CPUs, may run on %v", cpus)
		}
		t.Skipf("needs 2 CPUs, may run on %v", cpus)
	}
	eachImpl(t, func(t *testing.T) {
		const (
			slots = 64
			size  = 1500
			batch = 16
		)
		batches := uint64(4000)
		if testing.Short() { // make test runs -short under the race detector
			batches = 400
		}
		ring := make([]byte, slots*2048)
		var prod, cons atomic.Uint64
		deadline := time.Now().Add(60 * time.Second)
		var wg sync.WaitGroup
		var bad atomic.Int64
		bad.Store(-1)
		errc := make(chan error, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pin(cpus[1]); err != nil {
				errc <- err
				return
			}
			for seq := uint64(0); seq < batches*batch; {
				p := prod.Load()
				if seq == p {
					if time.Now().After(deadline) {
						bad.Store(-2)
						return
					}
					continue
				}
				// Newest first: the last buffer's last lines are the
				// stores most likely not yet visible.
				for s := p; s > seq; s-- {
					if !stamped(ring[((s-1)%slots)*2048:][:size], s-1) && bad.Load() == -1 {
						bad.Store(int64(s - 1))
					}
				}
				seq = p
				cons.Store(seq)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pin(cpus[0]); err != nil {
				errc <- err
				return
			}
			src := make([][]byte, batch)
			for i := range src {
				src[i] = make([]byte, size)
			}
			for seq := uint64(0); seq < batches*batch; seq += batch {
				for seq+batch-cons.Load() > slots {
					if time.Now().After(deadline) {
						errc <- fmt.Errorf("consumer stalled at %d", cons.Load())
						return
					}
				}
				for i := uint64(0); i < batch; i++ {
					s := seq + i
					stamp(src[i], s)
					Copy(ring[(s%slots)*2048:][:size], src[i])
				}
				Fence()
				publish(&prod, seq+batch)
			}
		}()
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		switch b := bad.Load(); {
		case b == -2:
			t.Fatal("producer stalled")
		case b >= 0:
			t.Fatalf("consumer saw stale bytes in buffer %d", b)
		}
	})
}

// stamp fills b with 8-byte words that name seq and their position.
func stamp(b []byte, seq uint64) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], seq<<16|uint64(i))
	}
}

// stamped reports whether b holds what stamp(b, seq) wrote; it reads the
// last words first.
func stamped(b []byte, seq uint64) bool {
	for i := len(b)&^7 - 8; i >= 0; i -= 8 {
		if binary.LittleEndian.Uint64(b[i:]) != seq<<16|uint64(i) {
			return false
		}
	}
	return true
}

func TestNoAllocs(t *testing.T) {
	src := make([]byte, 4096)
	dst := make([]byte, 4096)
	if n := testing.AllocsPerRun(100, func() { Copy(dst, src); Copy(dst[:100], src); Fence() }); n != 0 {
		t.Errorf("Copy+Fence allocate %v times per run", n)
	}
}

// FuzzCopy compares the NT path (the cut-over lowered to 0) with the builtin
// copy for fuzzed contents, lengths and alignments.
func FuzzCopy(f *testing.F) {
	f.Add([]byte("hello, nontemporal world"), uint8(3), uint8(0))
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 700), uint8(63), uint8(17))
	f.Fuzz(func(t *testing.T, data []byte, dstOff, srcOff uint8) {
		old := minNT
		minNT = 0
		defer func() { minNT = old }()
		so := min(int(srcOff), len(data))
		src := bytes.Clone(data[so:])
		a := newArena(len(src))
		for i := range src {
			if src[i] == 0xA5 {
				src[i] = 0x5A // the arena's fill byte must differ from src
			}
		}
		d := a.dst(len(src), int(dstOff)&63)
		if n := Copy(d, src); n != len(src) {
			t.Fatalf("Copy returned %d, want %d", n, len(src))
		}
		a.check(t, src, fmt.Sprintf("len %d dst align %d", len(src), dstOff&63))
	})
}
