//go:build gc && !purego

package nt

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestImplsPresent reads the CPU's flags from /proc/cpuinfo, a source
// independent of x/sys/cpu, and fails if an implementation that the CPU
// can run is not tested, or if the default is not the widest one.
func TestImplsPresent(t *testing.T) {
	flags := cpuinfoFlags(t)
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

// cpuinfoFlags returns the flags of the first processor in /proc/cpuinfo.
func cpuinfoFlags(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatalf("reading the CPU's flags: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "flags" {
			m := map[string]bool{}
			for _, f := range strings.Fields(v) {
				m[f] = true
			}
			return m
		}
	}
	t.Fatal("/proc/cpuinfo has no flags line")
	return nil
}
