package asmtest

import (
	"os"
	"strings"
	"testing"
)

// CPUFlags returns the flags of the first processor in /proc/cpuinfo
// ("avx2", "avx512f", ...), and fails tb if there are none.
func CPUFlags(tb testing.TB) map[string]bool {
	tb.Helper()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		tb.Fatalf("reading the CPU's flags: %v", err)
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
	tb.Fatal("/proc/cpuinfo has no flags line")
	return nil
}
