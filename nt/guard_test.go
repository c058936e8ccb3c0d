//go:build linux

package nt

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// guarded maps pages of data between two PROT_NONE pages: a read or write
// of one byte before or after the data faults.
func guarded(t *testing.T, pages int) []byte {
	t.Helper()
	ps := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, (pages+2)*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	for _, g := range [][]byte{mem[:ps], mem[(pages+1)*ps:]} {
		if err := unix.Mprotect(g, unix.PROT_NONE); err != nil {
			t.Fatalf("mprotect: %v", err)
		}
	}
	return mem[ps : (pages+1)*ps]
}

// TestGuardPage copies with each implementation's NT path (minNT 0)
// between slices that end right before a PROT_NONE page, and slices that
// start right after one, for every length 0..256 and the page multiples up
// to 64 KiB with their neighbours, at several source offsets from the
// guard. A kernel that touches a byte outside its slices faults (the test
// binary dies, naming the address).
func TestGuardPage(t *testing.T) {
	ps := unix.Getpagesize()
	lengths := []int{}
	for n := 0; n <= 256; n++ {
		lengths = append(lengths, n)
	}
	for n := ps; n <= 64<<10; n += ps {
		lengths = append(lengths, n-64, n-1, n, n+1, n+63)
	}
	maxLen := lengths[len(lengths)-1] + 64
	pages := (maxLen + ps - 1) / ps
	old := minNT
	minNT = 0
	defer func() { minNT = old }()
	eachImpl(t, func(t *testing.T) {
		src, dst := guarded(t, pages), guarded(t, pages)
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
				if got := Copy(d, s); got != n || !bytes.Equal(d, s) {
					t.Fatalf("len %d, source %d bytes before the guard, destination at the guard: copied %d, equal %v", n, gap, got, bytes.Equal(d, s))
				}
				s, d = src[gap:gap+n], dst[:n]
				clear(d)
				if got := Copy(d, s); got != n || !bytes.Equal(d, s) {
					t.Fatalf("len %d, source %d bytes after the guard, destination after it: copied %d, equal %v", n, gap, got, bytes.Equal(d, s))
				}
			}
		}
	})
}
