//go:build linux

package csum

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// guarded is an anonymous mapping of data pages between two PROT_NONE
// pages, so that a read or write of one byte before or after the data
// faults.
type guarded struct {
	mem  []byte // the whole mapping
	data []byte // the pages between the guards
}

func newGuarded(t testing.TB, pages int) *guarded {
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
	return &guarded{mem: mem, data: mem[ps : (pages+1)*ps]}
}

// end returns the n bytes that end right before the upper guard page.
func (g *guarded) end(n int) []byte { return g.data[len(g.data)-n:] }

// start returns the n bytes that start right after the lower guard page.
func (g *guarded) start(n int) []byte { return g.data[:n] }

// guardLengths are the lengths TestGuardPage checks: every length 0..256,
// and the page multiples up to 64 KiB with their neighbours.
func guardLengths() []int {
	var l []int
	for n := 0; n <= 256; n++ {
		l = append(l, n)
	}
	ps := unix.Getpagesize()
	for n := ps; n <= 64<<10; n += ps {
		l = append(l, n-64, n-1, n, n+1, n+63)
	}
	return l
}

// TestGuardPage runs Sum and CopyAndSum with every kernel set over slices
// that end right before a PROT_NONE page, and that start right after one,
// source and destination alike. A kernel that touches a byte outside its
// slices faults (the test binary dies, naming the address); its results
// must match the pure-Go kernel's. (A masked
// load does not fault, so this test guards correctness only; the cost of
// touching the next page is pinned by BenchmarkSum, whose cases are named by layout.)
func TestGuardPage(t *testing.T) {
	lengths := guardLengths()
	maxLen := lengths[len(lengths)-1]
	ps := unix.Getpagesize()
	pages := (maxLen + ps - 1) / ps
	src, dst := newGuarded(t, pages), newGuarded(t, pages)
	for i := range src.data {
		src.data[i] = byte(i*7 + 3)
	}

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
		want[key{n, true}] = Sum(src.end(n), 0x1234)
		want[key{n, false}] = Sum(src.start(n), 0x1234)
	}
	restore()

	forEachImpl(t, func(t *testing.T) {
		for _, n := range lengths {
			for _, atEnd := range []bool{true, false} {
				where := "start"
				s, d := src.start(n), dst.start(n)
				if atEnd {
					where = "end"
					s, d = src.end(n), dst.end(n)
				}
				w := want[key{n, atEnd}]
				if got := Sum(s, 0x1234); got != w {
					t.Fatalf("Sum(len %d at page %s) = %#x, want %#x", n, where, got, w)
				}
				clear(d)
				if got := CopyAndSum(d, s, 0x1234); got != w || !bytes.Equal(d, s) {
					t.Fatalf("CopyAndSum(len %d at page %s) = %#x, want %#x (copy equal: %v)", n, where, got, w, bytes.Equal(d, s))
				}
			}
		}
	})
}
