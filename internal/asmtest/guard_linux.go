package asmtest

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"
)

// Guarded maps pages pages of zeroed memory between two PROT_NONE pages
// and returns them: a read or write of one byte before or after the slice
// faults (the test binary dies, naming the address). The mapping is
// removed when tb ends.
func Guarded(tb testing.TB, pages int) []byte {
	tb.Helper()
	ps := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, (pages+2)*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatalf("mmap: %v", err)
	}
	tb.Cleanup(func() { _ = unix.Munmap(mem) })
	for _, g := range [][]byte{mem[:ps], mem[(pages+1)*ps:]} {
		if err := unix.Mprotect(g, unix.PROT_NONE); err != nil {
			tb.Fatalf("mprotect: %v", err)
		}
	}
	return mem[ps : (pages+1)*ps : (pages+1)*ps]
}

// GuardLengths are the lengths a guard-page test checks: every length
// 0..256, and every page multiple up to 64 KiB with its neighbours
// (64 and 1 bytes less, 1 and 63 bytes more). They ascend.
func GuardLengths() []int {
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

// Pages returns how many pages hold n bytes.
func Pages(n int) int {
	ps := unix.Getpagesize()
	return (n + ps - 1) / ps
}

// Fault runs f and returns the memory fault it caused, if any, as an error
// that names the address (debug.SetPanicOnFault), so that a test can say
// which kernel and length touched a guard page instead of dying.
func Fault(f func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(runtime.Error)
			if !ok {
				panic(r)
			}
			err = e
			if a, ok := e.(interface{ Addr() uintptr }); ok {
				err = fmt.Errorf("fault at %#x: %w", a.Addr(), e)
			}
		}
	}()
	f()
	return nil
}
