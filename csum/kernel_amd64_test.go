//go:build amd64 && gc && !purego

package csum

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// TestVectorKernels calls the vector kernels directly (sumAVX512, which
// sum runs inline, and those that copyAndSum reaches by a tail call), at
// every length 0..1100 and offset
// 0..7, with random initial values, against the byte-pair reference; the
// copy kernels into a destination longer than the source, whose extra
// bytes must stay untouched.
func TestVectorKernels(t *testing.T) {
	type kernel struct {
		name string
		ok   bool
		f    func([]byte, uint32) uint32
		copy func(dst, src []byte, initial uint32) uint32
	}
	avx512 := cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
	for _, k := range []kernel{
		{"avx512", avx512, func(b []byte, initial uint32) uint32 { return Add(sumAVX512(unsafe.SliceData(b), len(b)), initial) }, nil},
		{"copy-avx2", cpu.X86.HasAVX2, nil, slices2(copySumAVX2)},
		{"copy-avx512", avx512, nil, slices2(copySumAVX512)},
	} {
		if !k.ok {
			continue // the CPU lacks it (TestImplsPresent checks the flags)
		}
		t.Run(k.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, 18))
			buf := randBytes(r, 1100+8)
			dst := make([]byte, 1100+8+8)
			for n := 0; n <= 1100; n++ {
				for off := 0; off < 8; off++ {
					b := buf[off : off+n]
					// Full 32-bit initial values (the end-around carry
					// of adding one), the extremes among them.
					init := [...]uint32{r.Uint32(), 0xffffffff, 0x80000000, 0xffff}[(n+off)%4]
					want := refSum(b, Fold(init))
					if k.f != nil {
						if got := Fold(k.f(b, init)); got != want {
							t.Fatalf("len %d, off %d: %#04x, want %#04x", n, off, got, want)
						}
						// Not just congruent: the Go kernel's partial sum
						// (the other kernels are held to it too).
						if got, exact := sumAVX512(unsafe.SliceData(b), n), toBE(sumGo(b, 0)); got != exact {
							t.Fatalf("len %d, off %d: sumAVX512 %#08x, the Go kernel's %#08x", n, off, got, exact)
						}
						continue
					}
					for i := range dst {
						dst[i] = 0xA5
					}
					d := dst[off : off+n+8]
					if got := Fold(k.copy(d, b, init)); got != want {
						t.Fatalf("len %d, off %d: %#04x, want %#04x", n, off, got, want)
					}
					if !bytes.Equal(d[:n], b) {
						t.Fatalf("len %d, off %d: copy differs", n, off)
					}
					for i, c := range dst {
						if (i < off || i >= off+n) && c != 0xA5 {
							t.Fatalf("len %d, off %d: byte %d outside dst[:len(src)] written", n, off, i)
						}
					}
				}
			}
		})
	}
}

// TestSumSlow calls sumSlow and copySumSlow, which sum and copyAndSum
// reach only by a tail call from assembly (without assembly, and for
// slices longer than maxChunk), directly, with and without assembly,
// against the byte-pair reference.
func TestSumSlow(t *testing.T) {
	defer func(a bool, c int) {
		useAsm = a
		setMaxChunk(c)
	}(useAsm, maxChunk)
	r := rand.New(rand.NewPCG(19, 20))
	buf := randBytes(r, 3000)
	dst := make([]byte, len(buf))
	for _, asm := range []bool{false, true} {
		useAsm = asm
		for _, chunk := range []int{64, 1 << 30} {
			setMaxChunk(chunk)
			for n := 0; n <= len(buf); n += 1 + n/7 {
				init := uint16(r.Uint32())
				want := refSum(buf[:n], init)
				if got := Fold(Add(sumSlow(unsafe.SliceData(buf), n), uint32(init))); got != want {
					t.Fatalf("asm %v, chunk %d, len %d: %#04x, want %#04x", asm, chunk, n, got, want)
				}
				clear(dst)
				if got := Fold(copySumSlow(unsafe.SliceData(dst), unsafe.SliceData(buf), n, uint32(init))); got != want || !bytes.Equal(dst[:n], buf[:n]) {
					t.Fatalf("copy: asm %v, chunk %d, len %d: %#04x, want %#04x (copy equal: %v)", asm, chunk, n, got, want, bytes.Equal(dst[:n], buf[:n]))
				}
			}
		}
	}
}

// TestDispatchAVX512 checks the thresholds that setDispatch computes for
// a CPU with AVX-512 and the default settings (the adc code below
// vectorMin, the AVX2 kernel inline up to avx512Min-1, the AVX-512 kernel
// inline from there to maxChunk, and nothing to it without AVX-512), and
// every length's sum below avx512Min. It runs on any AVX2
// CPU: with useAVX512 set, no length below avx512Min reaches an AVX-512
// instruction.
func TestDispatchAVX512(t *testing.T) {
	if !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: the AVX2 kernel cannot run") // TestImplsPresent says what the CPU has
	}
	defer func(a, a5 bool) {
		useAVX2, useAVX512 = a, a5
		setDispatch()
	}(useAVX2, useAVX512)
	useAVX2, useAVX512 = true, true
	setDispatch()
	if scalarMax != vectorMin || avx2Max != avx512Min-1 || avx512Max != maxChunk {
		t.Fatalf("with AVX-512: scalarMax %d, avx2Max %d, avx512Max %d; want %d (vectorMin), %d (avx512Min-1) and %d (maxChunk)",
			scalarMax, avx2Max, avx512Max, vectorMin, avx512Min-1, maxChunk)
	}
	useAVX512 = false
	setDispatch()
	if avx2Max != maxChunk || avx512Max != -1 {
		t.Fatalf("without AVX-512: avx2Max %d, avx512Max %d; want %d (maxChunk) and -1", avx2Max, avx512Max, maxChunk)
	}
	useAVX512 = true
	setDispatch()
	r := rand.New(rand.NewPCG(19, 20))
	buf := randBytes(r, avx512Min+8)
	for n := 0; n < avx512Min; n++ {
		for off := 0; off < 8; off++ {
			b := buf[off : off+n]
			init := r.Uint32()
			if got, want := Fold(Sum(b, init)), refSum(b, Fold(init)); got != want {
				t.Fatalf("len %d, off %d: %#04x, want %#04x", n, off, got, want)
			}
		}
	}
}

// slices2 makes a copy kernel that takes pointers and a length take
// slices, for the table of TestVectorKernels (len(dst) >= len(src)).
func slices2(f func(dst, src *byte, n int, initial uint32) uint32) func(dst, src []byte, initial uint32) uint32 {
	return func(dst, src []byte, initial uint32) uint32 {
		return f(unsafe.SliceData(dst), unsafe.SliceData(src), len(src), initial)
	}
}
