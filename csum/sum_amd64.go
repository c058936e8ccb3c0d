//go:build amd64 && gc && !purego

package csum

import "golang.org/x/sys/cpu"

// Feature flags, set once from CPUID and switched by the tests so that every
// kernel runs on a machine that has them all.
var (
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2
)

// Size thresholds, in bytes, from which the assembly kernels are used:
// below them the call and the vector set-up and reduction cost more than
// they save (see BenchmarkSum). Variables so that the tests can drive the
// kernels with every length.
var (
	avx2Min       = 32
	avx512Min     = 32
	avx512CopyMin = 64 // below 64 bytes the kernel needs a slow masked store
)

// sumAVX2 adds the little-endian words of b to acc (see sum_go.go).
//
//go:noescape
func sumAVX2(b []byte, acc uint64) uint64

// sumAVX512 is sumAVX2 with 512-bit vectors and a masked load for the tail.
//
//go:noescape
func sumAVX512(b []byte, acc uint64) uint64

// copySumAVX2 copies src to dst (len(dst) == len(src)) and sums src.
//
//go:noescape
func copySumAVX2(dst, src []byte, acc uint64) uint64

// copySumAVX512 is copySumAVX2 with 512-bit vectors.
//
//go:noescape
func copySumAVX512(dst, src []byte, acc uint64) uint64

func sum(b []byte, acc uint64) uint64 {
	switch {
	case useAVX512 && len(b) >= avx512Min:
		return sumAVX512(b, acc)
	case useAVX2 && len(b) >= avx2Min:
		return sumAVX2(b, acc)
	}
	return sumGo(b, acc)
}

func copySum(dst, src []byte, acc uint64) uint64 {
	switch {
	case useAVX512 && len(src) >= avx512CopyMin:
		return copySumAVX512(dst, src, acc)
	case useAVX2 && len(src) >= avx2Min:
		return copySumAVX2(dst, src, acc)
	}
	return copySumGo(dst, src, acc)
}

// impls lists the kernel sets this machine can run, for the tests. Each
// assembly set is used for every length, down to 0.
var impls = func() []impl {
	set := func(avx2, avx512 bool) func() func() {
		return func() func() {
			a2, a5, m2, m5, c5 := useAVX2, useAVX512, avx2Min, avx512Min, avx512CopyMin
			useAVX2, useAVX512, avx2Min, avx512Min, avx512CopyMin = avx2, avx512, 0, 0, 0
			return func() {
				useAVX2, useAVX512, avx2Min, avx512Min, avx512CopyMin = a2, a5, m2, m5, c5
			}
		}
	}
	l := []impl{{"go", set(false, false)}}
	if useAVX2 {
		l = append(l, impl{"avx2", set(true, false)})
	}
	if useAVX512 {
		l = append(l, impl{"avx512", set(true, true)})
	}
	return l
}()
