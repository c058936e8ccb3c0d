package nt

import "golang.org/x/sys/unix"

// allocRing returns n bytes of anonymous memory for a calibration ring, with
// its pages faulted in, and the function that frees it. The mapping asks for
// transparent huge pages: faulting a 64 MiB ring in 4 KiB pages costs over
// 100 ms in a VM, in 2 MiB pages a few ms. If mmap fails it falls back to
// the Go heap.
func allocRing(n int) ([]byte, func()) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return heapRing(n)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice only; 4 KiB pages work too
	touch(b)
	return b, func() { _ = unix.Munmap(b) }
}
