package nt

import "unsafe"

// This file holds the package's only address arithmetic.

// headLen returns how many bytes separate the start of b from the next
// 64-byte boundary (0 if b starts on one). b must not be empty.
func headLen(b []byte) int {
	return int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
}

// overlap reports whether the memory of a and b intersects. Both are non-empty.
func overlap(a, b []byte) bool {
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
