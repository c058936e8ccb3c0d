//go:build amd64 && gc && !purego

package csum

import "golang.org/x/sys/cpu"

// Feature flags, set once from CPUID and switched by the tests so that every
// kernel runs on a machine that has them all.
var (
	useADC    = true // every amd64
	useADX    = cpu.X86.HasADX
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
)

// Size thresholds, in bytes (see BenchmarkSum and BenchmarkSumImpl). Below
// vectorMin a scalar add-with-carry chain beats the vector kernels, whose
// set-up and reduction cost more than they save there. Variables so that
// the tests can drive every kernel with every length.
var (
	vectorMin     = 256
	avx512Min     = 256
	avx512CopyMin = 64
)

// sumADC adds the little-endian 64-bit words of b to acc with one
// add-with-carry chain (see sum_go.go for what the result means).
//
//go:noescape
func sumADC(b []byte, acc uint64) uint64

// sumADX is sumADC with two chains, ADCX through the carry flag and ADOX
// through the overflow flag.
//
//go:noescape
func sumADX(b []byte, acc uint64) uint64

// sumAVX2 adds b to acc with 256-bit vectors and a scalar tail.
//
//go:noescape
func sumAVX2(b []byte, acc uint64) uint64

// sumAVX512 is sumAVX2 with 512-bit vectors.
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
	if len(b) >= vectorMin {
		switch {
		case useAVX512 && len(b) >= avx512Min:
			return sumAVX512(b, acc)
		case useAVX2:
			return sumAVX2(b, acc)
		}
	}
	switch {
	case useADX:
		return sumADX(b, acc)
	case useADC:
		return sumADC(b, acc)
	}
	return sumGo(b, acc)
}

func copySum(dst, src []byte, acc uint64) uint64 {
	switch {
	case useAVX512 && len(src) >= avx512CopyMin:
		return copySumAVX512(dst, src, acc)
	case useAVX2:
		return copySumAVX2(dst, src, acc)
	}
	return copySumGo(dst, src, acc)
}

// impls lists the kernel sets this machine can run, for the tests. Each
// set is used for every length, down to 0 (sumSmall is switched off); "go"
// is the pure-Go build's kernels.
var impls = func() []impl {
	type state struct {
		adc, adx, avx2, avx512, small bool
		vec, v512, c512               int
	}
	get := func() state {
		return state{useADC, useADX, useAVX2, useAVX512, useSmall, vectorMin, avx512Min, avx512CopyMin}
	}
	put := func(s state) {
		useADC, useADX, useAVX2, useAVX512, useSmall = s.adc, s.adx, s.avx2, s.avx512, s.small
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
		{"go", set(state{vec: scalarOnly})},
		{"adc", set(state{adc: true, vec: scalarOnly})},
	}
	if cpu.X86.HasADX {
		l = append(l, impl{"adx", set(state{adx: true, vec: scalarOnly})})
	}
	if cpu.X86.HasAVX2 {
		l = append(l, impl{"avx2", set(state{avx2: true})})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasAVX512F {
		l = append(l, impl{"avx512", set(state{avx2: true, avx512: true})})
	}
	return l
}()
