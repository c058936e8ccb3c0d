package nt

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Benchmark names carry the size of one copy; b.SetBytes makes MB/s the
// copy bandwidth. "copy" is the builtin copy with ordinary stores at every
// size (in pieces below 1 MiB, where the runtime's memmove would itself turn
// to NT stores); "builtin" is the plain builtin copy; "nt" is Copy with one
// Fence per 32 copies (and at the end of every b.N loop), "nt-fence-each" is
// Copy followed by Fence every time.

const benchRingBytes = 64 << 20 // twice the 32 MiB L3 one core of this machine sees

var benchRing = sync.OnceValue(func() []byte {
	b, _ := allocRing(benchRingBytes) // kept for the life of the test binary
	return b
})

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

type copyMode struct {
	name  string
	fn    func(dst, src []byte) int
	fence int // Fence every this many copies; 0 = never
}

var (
	modeCopy    = copyMode{"copy", copyOrdinary, 0}
	modeBuiltin = copyMode{"builtin", func(d, s []byte) int { return copy(d, s) }, 0}
	modeNT      = copyMode{"nt", Copy, 32}
	modeNTEach  = copyMode{"nt-fence-each", Copy, 1}
)

// runCopies copies src b.N times into dst slots chosen by next.
func runCopies(b *testing.B, m copyMode, src []byte, dst func(i int) []byte) {
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.fn(dst(i), src)
		if m.fence > 0 && (i+1)%m.fence == 0 {
			Fence()
		}
	}
	if m.fence > 0 {
		Fence()
	}
}

// BenchmarkCopy measures bandwidth into a hot destination (one buffer written
// again and again) and into a destination that cycles through a 64 MiB ring.
func BenchmarkCopy(b *testing.B) {
	src := source(16<<20, 9)
	for _, where := range []string{"hot", "ring"} {
		sizes := []int{64, 1500, 4096, 64 << 10, 1 << 20, 16 << 20}
		if where == "hot" {
			sizes = []int{64, 1500, 64 << 10, 1 << 20} // 16 MiB is not hot anywhere
		}
		for _, n := range sizes {
			modes := []copyMode{modeCopy, modeNT}
			if where == "ring" && n <= 4096 {
				modes = append(modes, modeNTEach)
			}
			if where == "ring" && n == 16<<20 {
				modes = append(modes, modeBuiltin)
			}
			for _, m := range modes {
				b.Run(fmt.Sprintf("%s/%s/%s", where, m.name, sizeName(n)), func(b *testing.B) {
					s := src[:n]
					var dst func(int) []byte
					if where == "hot" {
						hot := make([]byte, n)
						dst = func(int) []byte { return hot }
					} else {
						ring := benchRing()
						stride := (n + 63) &^ 63
						slots := len(ring) / stride
						dst = func(i int) []byte { off := (i % slots) * stride; return ring[off : off+n] }
					}
					runCopies(b, m, s, dst)
				})
			}
		}
	}
}

// BenchmarkImpl compares the implementations on 64 KiB copies into the ring.
func BenchmarkImpl(b *testing.B) {
	src := source(64<<10, 10)
	for _, im := range implementations() {
		if !im.present {
			continue
		}
		for _, n := range []int{64 << 10} {
			b.Run(fmt.Sprintf("%s/%s", im.name, sizeName(n)), func(b *testing.B) {
				defer im.force()()
				ring := benchRing()
				stride := (n + 63) &^ 63
				slots := len(ring) / stride
				runCopies(b, modeNT, src[:n], func(i int) []byte { off := (i % slots) * stride; return ring[off : off+n] })
			})
		}
	}
}

// BenchmarkPollution measures what seed 000 measured as latency: between
// rounds of copying 512 packets of 1500 bytes (750 KB) into the ring, fenced
// per 32, the application reads its working set of 512 KiB (half the L2) or
// 1 MiB (the whole L2). ws-ns/op is the time of that
// read, the figure NT stores should lower; ns/op is the whole round.
func BenchmarkPollution(b *testing.B) {
	const (
		pkt     = 1500
		perLoop = 512
	)
	src := source(pkt, 11)[:pkt]
	for _, wsBytes := range []int{512 << 10, 1 << 20} {
		ws := make([]uint64, wsBytes/8)
		for i := range ws {
			ws[i] = uint64(i)
		}
		for _, m := range []copyMode{modeCopy, modeNT} {
			b.Run(fmt.Sprintf("ws=%s/%s/%s", sizeName(wsBytes), m.name, sizeName(pkt)), func(b *testing.B) {
				ring := benchRing()
				const stride = 2048
				slots := len(ring) / stride
				slot := 0
				var wsTime time.Duration
				var sink uint64
				sink += sumWords(ws) // warm
				b.SetBytes(perLoop * pkt)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for j := 0; j < perLoop; j++ {
						m.fn(ring[slot*stride:slot*stride+pkt], src)
						if m.fence > 0 && (j+1)%m.fence == 0 {
							Fence()
						}
						if slot++; slot == slots {
							slot = 0
						}
					}
					t0 := time.Now()
					sink += sumWords(ws)
					wsTime += time.Since(t0)
				}
				b.ReportMetric(float64(wsTime.Nanoseconds())/float64(b.N), "ws-ns/op")
				if sink == 42 {
					b.Log("unlikely")
				}
			})
		}
	}
}

// sumWords reads every word of w.
func sumWords(w []uint64) uint64 {
	var a, b, c, d uint64
	for len(w) >= 4 {
		a += w[0]
		b += w[1]
		c += w[2]
		d += w[3]
		w = w[4:]
	}
	for _, x := range w {
		a += x
	}
	return a + b + c + d
}
