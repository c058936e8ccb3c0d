//go:build gc && !purego

package csum

import (
	"slices"
	"testing"

	"github.com/xdpkit/xdpkit/internal/asmtest"
)

// TestImplsPresent reads the CPU's flags from /proc/cpuinfo, a source
// independent of x/sys/cpu, and fails if a kernel set that the CPU can run
// is not tested, or if Sum does not use the widest one by default.
func TestImplsPresent(t *testing.T) {
	flags := asmtest.CPUFlags(t)
	want := []string{"go", "adc"}
	if flags["avx2"] {
		want = append(want, "avx2", "avx2-loop")
	}
	if flags["avx2"] && flags["avx512f"] {
		want = append(want, "avx512")
	}
	var got []string
	for _, im := range impls {
		got = append(got, im.name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kernel sets tested: %v; the CPU (/proc/cpuinfo) can run %v", got, want)
	}
	if useAVX2 != flags["avx2"] || useAVX512 != (flags["avx2"] && flags["avx512f"]) {
		t.Fatalf("default kernels: avx2 %v, avx512 %v; the CPU has avx2 %v, avx512f %v",
			useAVX2, useAVX512, flags["avx2"], flags["avx512f"])
	}
}
