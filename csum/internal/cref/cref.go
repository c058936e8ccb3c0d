//go:build csumcgo && amd64 && linux

package cref

/*
#cgo CFLAGS: -O3 -march=native
#define main csumbench_main
#include "../../../bench/c/csumbench.c"
#undef main

// cref_time is csumbench's time_one by kernel index, in ns for all reps.
static double cref_time(int k, uint8_t *dst, const uint8_t *src, size_t n, long reps)
{
	return time_one(&kernels[k], dst, src, n, (uint64_t)reps) * (double)reps;
}

static int cref_has_avx512(void)
{
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
*/
import "C"

import "unsafe"

// Kernels, by their index in csumbench.c's table.
const (
	SumADC        = 0
	SumAVX2       = 1
	SumAVX512     = 2 // only where HasAVX512
	CopySumAVX2   = 3
	CopySumAVX512 = 4 // only where HasAVX512
	Memcpy        = 5
)

// HasAVX512 reports whether this CPU runs csumbench's AVX-512 kernels
// (AVX-512 F and BW, as csumbench itself checks).
func HasAVX512() bool { return C.cref_has_avx512() != 0 }

// Time returns the nanoseconds that reps chained calls of kernel k take
// over src (and dst for the copies); both must be non-empty.
func Time(k int, dst, src []byte, reps int) float64 {
	return float64(C.cref_time(C.int(k), (*C.uint8_t)(unsafe.Pointer(&dst[0])),
		(*C.uint8_t)(unsafe.Pointer(&src[0])), C.size_t(len(src)), C.long(reps)))
}
