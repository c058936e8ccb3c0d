//go:build !amd64 || !gc || purego

package csum

// Without assembly every size goes to the pure-Go kernels.

func sum(p *byte, n int) uint32 { return sumSlow(p, n) }

const useAsm = false

func copyAndSum(dst, src *byte, n int, initial uint32) uint32 {
	return copySumSlow(dst, src, n, initial)
}

// setMaxChunk sets maxChunk, for the tests.
func setMaxChunk(n int) { maxChunk = n }

// impls lists the kernel sets this build can run, for the tests.
var impls = []impl{{"go", func() func() { return func() {} }}}
