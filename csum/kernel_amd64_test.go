//go:build amd64 && gc && !purego

package csum

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestVectorKernels calls the vector kernels directly, as sum's tail calls
// reach them, at every length 0..1100 and offset 0..7, with random
// initial values, against the byte-pair reference.
func TestVectorKernels(t *testing.T) {
	type kernel struct {
		name string
		ok   bool
		f    func([]byte, uint32) uint32
	}
	for _, k := range []kernel{
		{"avx2", cpu.X86.HasAVX2, sumAVX2},
		{"avx512", cpu.X86.HasAVX2 && cpu.X86.HasAVX512F, sumAVX512},
	} {
		if !k.ok {
			continue // the CPU lacks it (TestImplsPresent checks the flags)
		}
		t.Run(k.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, 18))
			buf := randBytes(r, 1100+8)
			for n := 0; n <= 1100; n++ {
				for off := 0; off < 8; off++ {
					b := buf[off : off+n]
					init := uint16(r.Uint32())
					if got, want := Fold(k.f(b, uint32(init))), refSum(b, init); got != want {
						t.Fatalf("len %d, off %d: %#04x, want %#04x", n, off, got, want)
					}
				}
			}
		})
	}
}

// TestSumSlow calls sumSlow, which sum reaches only by a tail call from
// assembly (without assembly, and for slices longer than maxChunk),
// directly, with and without assembly, against the byte-pair reference.
func TestSumSlow(t *testing.T) {
	defer func(a bool, c int) { useAsm, maxChunk = a, c }(useAsm, maxChunk)
	r := rand.New(rand.NewPCG(19, 20))
	buf := randBytes(r, 3000)
	for _, asm := range []bool{false, true} {
		useAsm = asm
		for _, chunk := range []int{64, 1 << 30} {
			maxChunk = chunk
			for n := 0; n <= len(buf); n += 1 + n/7 {
				init := uint16(r.Uint32())
				if got, want := Fold(sumSlow(buf[:n], uint32(init))), refSum(buf[:n], init); got != want {
					t.Fatalf("asm %v, chunk %d, len %d: %#04x, want %#04x", asm, chunk, n, got, want)
				}
			}
		}
	}
}
