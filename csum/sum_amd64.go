//go:build amd64 && gc && !purego

package csum

import "golang.org/x/sys/cpu"

// Feature flags, set once from CPUID and switched by the tests so that every
// kernel runs on a machine that has them all.
var (
	useAsm    = true // false: the pure-Go kernels (for the tests)
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
)

// Size thresholds, in bytes (see BenchmarkSumImpl). Below vectorMin a
// scalar add-with-carry chain beats the vector kernels, whose set-up and
// reduction cost more than they save there. avx512Min is not re-measured
// on a CPU with AVX-512 since issue 19. Variables so that the tests can
// drive every kernel with every length.
var (
	vectorMin     = 320
	avx512Min     = 320
	avx512CopyMin = 64
)

// sum is Sum: see sum_amd64.s. The vector kernels take the same
// arguments and return the same result, so that sum reaches them by a
// tail call; the copy kernels return the little-endian word sum of src
// from 0 (see sum_go.go), which CopyAndSum adds to the initial value.

//go:noescape
func sum(b []byte, initial uint32) uint32

// sumAVX2 is sum with 256-bit vectors and a scalar tail.
//
//go:noescape
func sumAVX2(b []byte, initial uint32) uint32

// sumAVX512 is sumAVX2 with 512-bit vectors.
//
//go:noescape
func sumAVX512(b []byte, initial uint32) uint32

// copySumAVX2 copies src to dst (len(dst) == len(src)) and sums src.
//
//go:noescape
func copySumAVX2(dst, src []byte) uint64

// copySumAVX512 is copySumAVX2 with 512-bit vectors.
//
//go:noescape
func copySumAVX512(dst, src []byte) uint64

func copySum(dst, src []byte, acc uint64) uint64 {
	switch {
	case !useAsm:
	case useAVX512 && len(src) >= avx512CopyMin:
		return add64(acc, copySumAVX512(dst, src))
	case useAVX2:
		return add64(acc, copySumAVX2(dst, src))
	}
	return copySumGo(dst, src, acc)
}

// impls lists the kernel sets this machine can run, for the tests. Each
// assembly set is used for every length, down to 0 (sumSmall is switched
// off); "go" is the pure-Go build's kernels, with sumSmall below 32 bytes.
var impls = func() []impl {
	type state struct {
		asm, avx2, avx512, small bool
		vec, v512, c512          int
	}
	get := func() state {
		return state{useAsm, useAVX2, useAVX512, useSmall, vectorMin, avx512Min, avx512CopyMin}
	}
	put := func(s state) {
		useAsm, useAVX2, useAVX512, useSmall = s.asm, s.avx2, s.avx512, s.small
		vectorMin, avx512Min, avx512CopyMin = s.vec, s.v512, s.c512
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
		{"go", set(state{small: true, vec: scalarOnly})}, // sumSmall below 32 bytes
		{"adc", set(state{asm: true, vec: scalarOnly})},
	}
	if cpu.X86.HasAVX2 {
		l = append(l, impl{"avx2", set(state{asm: true, avx2: true})})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasAVX512F {
		l = append(l, impl{"avx512", set(state{asm: true, avx2: true, avx512: true})})
	}
	return l
}()
