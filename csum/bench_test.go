package csum

import (
	"strconv"
	"testing"
	"time"
)

var benchSizes = []int{20, 64, 128, 256, 576, 1500, 4096, 9000, 16384, 32768, 65536}

var sink uint32

// naiveSum is the byte-pair loop that the targets compare with.
func naiveSum(b []byte, initial uint32) uint32 {
	s := initial
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)&1 != 0 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func benchBuf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

func forSizes(b *testing.B, f func(b *testing.B, n int)) {
	for _, n := range benchSizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			f(b, n)
		})
	}
}

// A layout says where a benchmark's buffer lies in memory (see
// layoutBuf): the time of a kernel that touches memory past the end of its
// slice depends on whether the next page is present.
type layout struct {
	name string
	size int
}

// layouts are BenchmarkSum's and BenchmarkCopyAndSum's cases:
//
//   - page-end: the buffer ends at the end of a page, and the next page
//     is PROT_NONE (a UMEM frame, a full chain segment, the end of a heap
//     arena);
//   - page-aligned: the buffer starts at a page, the page after the one
//     that holds its end is PROT_NONE (the same as page-end for page
//     multiples);
//   - mid-page: the buffer starts 2048 bytes into a page;
//   - frame: a 1500-byte packet at the usual 256-byte headroom of a 4 KiB
//     UMEM frame;
//   - frame-end: a chain segment from that headroom to the end of its
//     4 KiB frame, the next page PROT_NONE.
var layouts = func() []layout {
	var l []layout
	for _, n := range []int{20, 64, 128, 256, 1500, 4000, 4096, 8192, 9000, 65472, 65536} {
		l = append(l, layout{"page-end", n}, layout{"page-aligned", n}, layout{"mid-page", n})
	}
	return append(l, layout{"frame", 1500}, layout{"frame-end", 4096 - 256})
}()

// forLayouts runs f for each layout as sub-benchmark size/layout, with a
// buffer (and a destination of the same layout) from layoutBuf.
func forLayouts(b *testing.B, f func(b *testing.B, buf, dst []byte)) {
	for _, l := range layouts {
		b.Run(strconv.Itoa(l.size)+"/"+l.name, func(b *testing.B) {
			buf, dst := layoutBuf(b, l), layoutBuf(b, l)
			for i := range buf {
				buf[i] = byte(i*7 + 3)
			}
			b.SetBytes(int64(l.size))
			b.ReportAllocs()
			f(b, buf, dst)
		})
	}
}

// BenchmarkSum is the exported Sum with the default dispatch, by size and
// layout: BenchmarkSum/4096/page-end beside BenchmarkSum/4096/mid-page.
func BenchmarkSum(b *testing.B) {
	forLayouts(b, func(b *testing.B, buf, _ []byte) {
		s := sink // a local: the chain of sums stays in registers, as in C
		for b.Loop() {
			s = Sum(buf, s)
		}
		sink = s
	})
}

// BenchmarkSumImpl runs Sum with each kernel set forced for every size
// (every length its dispatch allows: see impls), on mid-page buffers.
func BenchmarkSumImpl(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			restore := im.use()
			defer restore()
			forSizes(b, func(b *testing.B, n int) {
				buf := layoutBuf(b, layout{"mid-page", n})
				s := sink
				for b.Loop() {
					s = Sum(buf, s)
				}
				sink = s
			})
		})
	}
}

func BenchmarkSumNaive(b *testing.B) {
	forSizes(b, func(b *testing.B, n int) {
		buf := benchBuf(n)
		for b.Loop() {
			sink = naiveSum(buf, sink)
		}
	})
}

// BenchmarkCopyAndSum is CopyAndSum with the default dispatch, by size and
// layout, source and destination alike.
func BenchmarkCopyAndSum(b *testing.B) {
	forLayouts(b, func(b *testing.B, src, dst []byte) {
		s := sink
		for b.Loop() {
			s = CopyAndSum(dst, src, s)
		}
		sink = s
	})
}

func BenchmarkCopyAndSumImpl(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			restore := im.use()
			defer restore()
			forSizes(b, func(b *testing.B, n int) {
				src, dst := layoutBuf(b, layout{"mid-page", n}), layoutBuf(b, layout{"mid-page", n})
				s := sink
				for b.Loop() {
					s = CopyAndSum(dst, src, s)
				}
				sink = s
			})
		})
	}
}

// BenchmarkCopyThenSum is what CopyAndSum replaces: copy, then Sum over
// the copy.
func BenchmarkCopyThenSum(b *testing.B) {
	forSizes(b, func(b *testing.B, n int) {
		src, dst := benchBuf(n), make([]byte, n)
		for b.Loop() {
			copy(dst, src)
			sink = Sum(dst, sink)
		}
	})
}

// BenchmarkCopy is copy() alone, the floor for CopyAndSum.
func BenchmarkCopy(b *testing.B) {
	forSizes(b, func(b *testing.B, n int) {
		src, dst := benchBuf(n), make([]byte, n)
		for b.Loop() {
			copy(dst, src)
		}
	})
}

func BenchmarkUpdate16(b *testing.B) {
	b.ReportAllocs()
	c := uint16(0x1234)
	for b.Loop() {
		c = Update16(c, 0x4011, 0x3f11)
	}
	sink = uint32(c)
}

func BenchmarkFillFrame(b *testing.B) {
	for _, n := range []int{64, 1500} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			f := testFrameUDP4(n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if err := FillFrame(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIPv4Header(b *testing.B) {
	h := testFrameUDP4(64)[14:34]
	b.ReportAllocs()
	for b.Loop() {
		sink += uint32(IPv4Header(h))
	}
}

// BenchmarkPaired is the benchmark behind the table in README.md. It runs
// Sum, SumNaive, CopyAndSum, copy() then Sum, and copy() alone, in
// alternating blocks of about 256 KiB of data each (a few microseconds),
// b.N blocks per function, and reports for each the fastest block in ns/op
// (less the timer's own cost). On a shared machine the fastest block is the
// one least disturbed by other work, and alternating the functions keeps
// their figures comparable. Run it with -benchtime=400x; with -benchtime=1x
// (CI) it is one block each.
func BenchmarkPaired(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			src, dst := benchBuf(n), make([]byte, n)
			ops := max(1, (256<<10)/n)
			fns := []struct {
				name string
				f    func()
			}{
				{"sum", func() { sink = Sum(src, sink) }},
				{"naive", func() { sink = naiveSum(src, sink) }},
				{"fused", func() { sink = CopyAndSum(dst, src, sink) }},
				{"copythensum", func() { copy(dst, src); sink = Sum(dst, sink) }},
				{"copy", func() { copy(dst, src) }},
			}
			var timer time.Duration = 1 << 62
			for range 1000 {
				t0 := time.Now()
				timer = min(timer, time.Since(t0))
			}
			best := make([]time.Duration, len(fns))
			for j := range best {
				best[j] = 1 << 62
			}
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				for j, fn := range fns {
					t0 := time.Now()
					for range ops {
						fn.f()
					}
					best[j] = min(best[j], time.Since(t0)-timer)
				}
			}
			per := func(j int) float64 { return float64(best[j].Nanoseconds()) / float64(ops) }
			for j, fn := range fns {
				b.ReportMetric(per(j), fn.name+"-ns/op")
			}
			b.ReportMetric(per(1)/per(0), "sum-vs-naive")
			b.ReportMetric(per(3)/per(2), "fused-speedup")
		})
	}
}
