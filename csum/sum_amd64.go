//go:build amd64 && gc && !purego

package csum

import (
	"math"

	"golang.org/x/sys/cpu"
)

// Feature flags, set once from CPUID and switched by the tests so that every
// kernel runs on a machine that has them all.
var (
	useAsm    = true // false: the pure-Go kernels (for the tests)
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
)

// Size thresholds, in bytes. Below vectorMin a scalar add-with-carry
// chain beats the vector kernels, whose set-up and reduction cost more
// than they save there; copyVectorMin is the same for CopyAndSum. On an
// AVX2 CPU sum's inline AVX2 kernel is ahead of the adc chain, or even
// with it, from 33 bytes on (at 32 the adc code has a path without a
// loop). avx512Min is where the AVX-512 kernel overtakes the AVX2 one; with
// AVX-512 the AVX2 kernel takes the lengths below it. avx512CopyMin is
// not measured. The thresholds come from TestPairedC, which times each Go
// kernel beside its C counterpart in one process:
//
//	go test -tags csumcgo -c -o /tmp/csum-cref.test ./csum/
//	taskset -c 1 /tmp/csum-cref.test -test.run TestPairedC -test.v -paired.impls \
//		-paired.sizes 32,33,34,36,38,40,48,56,64,72,80,88,94
//
// They are decided from the CPU's features, not by timing at start-up.
// Variables so that the tests can drive every kernel with every length.
var (
	vectorMin     = 33
	avx512Min     = 288
	copyVectorMin = 128
	avx512CopyMin = 256
)

// Read by sum (sum_amd64.s) on every call, and computed by setDispatch
// from the flags and thresholds above: slices shorter than scalarMax are
// summed by the scalar code, slices of scalarMax to avx2Max bytes by the
// inline AVX2 kernels (midMax, sum's first comparison, splits them: the
// loop-free kernel below it, the looping one from it), longer ones up to
// avx512Max (-1 without AVX-512) by the inline AVX-512 kernel, and the
// rest after the checks that the flags ask for.
//
// They are set in their declaration, not by an init function, so that a
// Sum called while another package's variables are initialized finds
// them set.
//
//lint:ignore U1000 read by sum_amd64.s
var scalarMax, avx2Max, midMax, avx512Max = dispatch()

// useMid is false only in the tests' avx2-loop kernel set, which sends
// every length from scalarMax to the looping AVX2 kernel (see impls; a
// maxChunk below 127 does the same for the lengths up to it).
var useMid = true

// setDispatch computes scalarMax, avx2Max, midMax and avx512Max again. The tests
// call it after they change a flag, a threshold or maxChunk
// (setMaxChunk).
func setDispatch() { scalarMax, avx2Max, midMax, avx512Max = dispatch() }

// dispatch returns scalarMax, avx2Max, midMax and avx512Max for the current flags
// and thresholds. midMax is 128 (or scalarMax, if that is larger) where
// the inline AVX2 kernel takes every length from scalarMax to 127 (the
// loop-free kernel for fewer than 128 bytes needs AVX2 and at least 32
// bytes, which scalarMax is then), else scalarMax, so that the lengths
// from there go to the second comparison, with avx2Max: all of them to
// the checks without assembly, and to the scalar code without AVX2
// (scalarMax is then the largest int), to the AVX-512 kernel where the
// tests set avx512Min low, to sumSlow where they set maxChunk low, to the looping
// AVX2 kernel without useMid.
func dispatch() (scalar, avx2, mid, avx512 int) {
	switch {
	case !useAsm:
		return 0, -1, 0, -1 // every length to the checks: sumSlow
	case !useAVX2:
		return math.MaxInt, -1, math.MaxInt, -1
	}
	scalar = max(vectorMin, 32) // the kernel's last window is 32 bytes
	avx2, avx512 = maxChunk, -1
	if useAVX512 {
		// Every length above avx2Max up to maxChunk is then at least
		// avx512Min (and scalarMax, hence 32).
		avx2, avx512 = min(avx2, avx512Min-1), maxChunk
	}
	mid = scalar
	if avx2 >= 127 && useMid {
		mid = max(scalar, 128)
	}
	return scalar, avx2, mid, avx512
}

// tailShuf[r], r = n%32, is the VPSHUFB control with which sum adds
// the last r bytes of a slice of n >= 32 bytes, from the 32-byte window
// that ends at the end of the slice: it zeroes the 32-r bytes already
// summed and moves each of the others, inside its own 4-byte group of the
// window, to the place that its offset into the tail has in a 32-bit
// word. The tail starts at a multiple of 32, so every byte then has the
// weight (a power of 2^8 modulo 2^32-1) that the scalar code gives it,
// and every kernel returns the same partial sum, not just one congruent
// modulo 0xFFFF (TestGuardPage compares them). An odd last byte is left
// out (zeroed): every kernel adds it at place 0 of a word, weight 1, as
// the low byte of a 16-bit word that RFC 1071 pads, and sum does so
// apart.
//
//lint:ignore U1000 read by sum_amd64.s
var tailShuf = func() (t [32][32]byte) {
	for r := range t {
		for q := range t[r] {
			t[r][q] = 0x80 // VPSHUFB: zero
		}
		for j := range r &^ 1 { // none for r = 0: all zero
			p := 32 - r + j // the byte's place in the window
			t[r][p&^3|j&3] = byte(p & 15)
		}
	}
	return t
}()

// sum returns toBE of the sum of the n bytes at p, and copyAndSum is
// CopyAndSum of the n bytes at src into dst: see sum_amd64.s. sum runs
// its AVX2 and AVX-512 kernels inline (a call less, which BenchmarkSum
// shows at 512-1024 B); copyAndSum runs its AVX2 kernel inline too. Both reach the Go functions sumSlow and
// copySumSlow without assembly and for slices longer than maxChunk.

//go:noescape
func sum(p *byte, n int) uint32

//go:noescape
func copyAndSum(dst, src *byte, n int, initial uint32) uint32

// sumAVX512 is sum's AVX-512 kernel on its own, for the tests (every
// length, below 32 bytes its scalar tail).
//
//go:noescape
func sumAVX512(p *byte, n int) uint32

// copySumAVX2 is copyAndSum with 256-bit vectors, for n >= 32.
//
//go:noescape
func copySumAVX2(dst, src *byte, n int, initial uint32) uint32

// copySumAVX512 is copySumAVX2 with 512-bit vectors.
//
//go:noescape
func copySumAVX512(dst, src *byte, n int, initial uint32) uint32

// setMaxChunk sets maxChunk, for the tests.
func setMaxChunk(n int) {
	maxChunk = n
	setDispatch()
}

// impls lists the kernel sets this machine can run, for the tests. Each
// assembly set is used for every length it can take (thresholds 0 for
// the vector sets: sum's vector kernels from 32 bytes, setDispatch's
// floor for the AVX2 tail window, and the scalar code below; in
// avx2-loop without the loop-free kernel below 128 bytes;
// copyAndSum's from 0, with their scalar tails; the
// scalar code of sum and copyAndSum for every length in adc); "go" is
// the pure-Go build's kernels, with sumSmall below 32 bytes.
// TestVectorKernels calls the vector kernels directly, too.
var impls = func() []impl {
	type state struct {
		asm, avx2, avx512, small, noMid bool
		vec, v512, cvec, c512           int
	}
	get := func() state {
		return state{useAsm, useAVX2, useAVX512, useSmall, !useMid, vectorMin, avx512Min, copyVectorMin, avx512CopyMin}
	}
	put := func(s state) {
		useAsm, useAVX2, useAVX512, useSmall, useMid = s.asm, s.avx2, s.avx512, s.small, !s.noMid
		vectorMin, avx512Min, copyVectorMin, avx512CopyMin = s.vec, s.v512, s.cvec, s.c512
		setDispatch()
	}
	set := func(s state) func() func() {
		return func() func() {
			old := get()
			put(s)
			return func() { put(old) }
		}
	}
	scalarOnly := 1 << 62
	l := []impl{
		{"go", set(state{small: true, vec: scalarOnly, cvec: scalarOnly})}, // sumSmall below 32 bytes
		{"adc", set(state{asm: true, vec: scalarOnly, cvec: scalarOnly})},
	}
	if cpu.X86.HasAVX2 {
		l = append(l, impl{"avx2", set(state{asm: true, avx2: true})})
		// The looping AVX2 kernel for every length from 32 bytes, whose
		// paths for fewer than 128 bytes the loop-free kernel takes over
		// in the other sets.
		l = append(l, impl{"avx2-loop", set(state{asm: true, avx2: true, noMid: true})})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasAVX512F {
		l = append(l, impl{"avx512", set(state{asm: true, avx2: true, avx512: true})})
	}
	return l
}()
