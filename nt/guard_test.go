//go:build linux

package nt

import (
	"bytes"
	"testing"

	"github.com/xdpkit/xdpkit/internal/asmtest"
)

// TestGuardPage copies with each implementation's NT path (minNT 0)
// between slices that end right before a PROT_NONE page, and slices that
// start right after one, for every length 0..256 and the page multiples up
// to 64 KiB with their neighbours, at several source offsets from the
// guard. A kernel that touches a byte outside its slices faults, and the
// test fails naming the implementation, the length and the address.
func TestGuardPage(t *testing.T) {
	lengths := asmtest.GuardLengths()
	pages := asmtest.Pages(lengths[len(lengths)-1] + 64)
	old := minNT
	minNT = 0
	defer func() { minNT = old }()
	eachImpl(t, func(t *testing.T) {
		src, dst := asmtest.Guarded(t, pages), asmtest.Guarded(t, pages)
		for i := range src {
			src[i] = byte(i*7 + 3)
		}
		for _, n := range lengths {
			// The source ends at the guard, or so many bytes before it;
			// the destination ends at the guard. Then both start at a
			// guard, the source that many bytes later.
			for _, gap := range []int{0, 1, 32, 63} {
				s := src[len(src)-gap-n : len(src)-gap]
				d := dst[len(dst)-n:]
				clear(d)
				var got int
				if err := asmtest.Fault(func() { got = Copy(d, s) }); err != nil {
					t.Fatalf("len %d, source %d bytes before the guard, destination at the guard: %v", n, gap, err)
				}
				if got != n || !bytes.Equal(d, s) {
					t.Fatalf("len %d, source %d bytes before the guard, destination at the guard: copied %d, equal %v", n, gap, got, bytes.Equal(d, s))
				}
				s, d = src[gap:gap+n], dst[:n]
				clear(d)
				if err := asmtest.Fault(func() { got = Copy(d, s) }); err != nil {
					t.Fatalf("len %d, source %d bytes after the guard, destination after it: %v", n, gap, err)
				}
				if got != n || !bytes.Equal(d, s) {
					t.Fatalf("len %d, source %d bytes after the guard, destination after it: copied %d, equal %v", n, gap, got, bytes.Equal(d, s))
				}
			}
		}
	})
}
