package asmtest

import (
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestCPUFlags(t *testing.T) {
	f := CPUFlags(t)
	if len(f) == 0 {
		t.Fatal("no flags")
	}
	if runtime.GOARCH == "amd64" && !f["sse2"] {
		t.Fatalf("an amd64 CPU without sse2: %v", f)
	}
}

// TestGuarded checks that the slice is writable end to end and that the
// bytes just before and just after it fault.
func TestGuarded(t *testing.T) {
	ps := unix.Getpagesize()
	b := Guarded(t, 2)
	if len(b) != 2*ps || cap(b) != 2*ps {
		t.Fatalf("len %d, cap %d, want %d", len(b), cap(b), 2*ps)
	}
	for i := range b {
		b[i] = byte(i)
	}
	base := unsafe.Pointer(unsafe.SliceData(b))
	for _, off := range []int{-1, len(b)} {
		p := (*byte)(unsafe.Add(base, off))
		if err := read(p); err == nil {
			t.Errorf("reading byte %d of the slice did not fault", off)
		}
	}
}

// read reads *p and returns the fault it caused, if any.
func read(p *byte) error { return Fault(func() { sinkByte = *p }) }

var sinkByte byte

func TestGuardLengths(t *testing.T) {
	l := GuardLengths()
	if !slices.IsSorted(l) {
		t.Fatal("not ascending")
	}
	for _, n := range []int{0, 1, 255, 256, unix.Getpagesize(), 64 << 10, 64<<10 + 63} {
		if !slices.Contains(l, n) {
			t.Errorf("%d missing", n)
		}
	}
	if got, want := Pages(64<<10+63), (64<<10+63+unix.Getpagesize()-1)/unix.Getpagesize(); got != want {
		t.Errorf("Pages = %d, want %d", got, want)
	}
}
