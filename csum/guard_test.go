//go:build linux

package csum

import (
	"bytes"
	"slices"
	"testing"

	"github.com/xdpkit/xdpkit/internal/asmtest"
)

// TestGuardPage runs Sum and CopyAndSum with every kernel set over slices
// that end right before a PROT_NONE page, and that start right after one,
// source and destination alike. A kernel that touches a byte outside its
// slices faults, and the test fails naming the kernel set, the length and
// the address; its results must match the pure-Go kernel's. (A masked load does not fault, so this
// test guards correctness only; the cost of touching the next page is
// pinned by BenchmarkSum, whose cases are named by layout.)
func TestGuardPage(t *testing.T) {
	// GuardLengths has every length to 256; sum's AVX2 kernels start at
	// 32 bytes in the avx2 and avx2-loop kernel sets (33 by default), so
	// every length to 600 covers each of the loop-free kernel's tails
	// (n%32) below 128 bytes, and each of the looping kernel's after 0
	// (avx2-loop) to 3 loop iterations and 0 to 3 more vectors (and some
	// after 4 iterations).
	lengths := asmtest.GuardLengths()
	for n := 257; n <= 600; n++ {
		lengths = append(lengths, n)
	}
	slices.Sort(lengths)
	lengths = slices.Compact(lengths)
	pages := asmtest.Pages(lengths[len(lengths)-1])
	src, dst := asmtest.Guarded(t, pages), asmtest.Guarded(t, pages)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	// end returns the n bytes of g that end right before its upper guard
	// page, start the n bytes that start right after its lower one.
	end := func(g []byte, n int) []byte { return g[len(g)-n:] }
	start := func(g []byte, n int) []byte { return g[:n] }

	// The pure-Go kernels' results, by length and placement.
	type key struct {
		n   int
		end bool
	}
	want := map[key]uint32{}
	restore := impls[0].use()
	if impls[0].name != "go" {
		t.Fatalf("impls[0] is %s, want go", impls[0].name)
	}
	for _, n := range lengths {
		want[key{n, true}] = Sum(end(src, n), 0x1234)
		want[key{n, false}] = Sum(start(src, n), 0x1234)
	}
	restore()

	forEachImpl(t, func(t *testing.T) {
		for _, n := range lengths {
			for _, atEnd := range []bool{true, false} {
				where := "start"
				s, d := start(src, n), start(dst, n)
				if atEnd {
					where = "end"
					s, d = end(src, n), end(dst, n)
				}
				w := want[key{n, atEnd}]
				var got uint32
				if err := asmtest.Fault(func() { got = Sum(s, 0x1234) }); err != nil {
					t.Fatalf("Sum(len %d at page %s): %v", n, where, err)
				}
				if got != w {
					t.Fatalf("Sum(len %d at page %s) = %#x, want %#x", n, where, got, w)
				}
				clear(d)
				if err := asmtest.Fault(func() { got = CopyAndSum(d, s, 0x1234) }); err != nil {
					t.Fatalf("CopyAndSum(len %d at page %s): %v", n, where, err)
				}
				if got != w || !bytes.Equal(d, s) {
					t.Fatalf("CopyAndSum(len %d at page %s) = %#x, want %#x (copy equal: %v)", n, where, got, w, bytes.Equal(d, s))
				}
			}
		}
	})
}
