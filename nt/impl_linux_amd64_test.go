//go:build gc && !purego

package nt

import (
	"slices"
	"testing"

	"github.com/xdpkit/xdpkit/internal/asmtest"
)

// TestImplsPresent reads the CPU's flags from /proc/cpuinfo, a source
// independent of x/sys/cpu, and fails if an implementation that the CPU
// can run is not tested, or if the default is not the widest one.
func TestImplsPresent(t *testing.T) {
	flags := asmtest.CPUFlags(t)
	var want []string
	if flags["avx512f"] {
		want = append(want, "avx512")
	}
	if flags["avx2"] {
		want = append(want, "avx2")
	}
	want = append(want, "sse2")
	var got []string
	for _, im := range implementations() {
		got = append(got, im.name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("implementations tested: %v; the CPU (/proc/cpuinfo) has %v", got, want)
	}
	if implName() != want[0] {
		t.Fatalf("Copy uses %s by default, want %s", implName(), want[0])
	}
}
