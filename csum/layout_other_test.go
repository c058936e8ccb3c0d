//go:build !linux

package csum

import "testing"

// layoutBuf returns a heap buffer of l.size bytes: the layouts need mmap
// and mprotect, which these benchmarks use only on Linux.
func layoutBuf(_ testing.TB, l layout) []byte { return make([]byte, l.size) }
