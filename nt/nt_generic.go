//go:build !amd64 || !gc || purego

package nt

// Supported reports whether Copy uses nontemporal stores in this build. It is
// false under the purego tag and on architectures other than amd64, where
// Copy is the builtin copy and Fence does nothing.
const Supported = false

// Fence does nothing in this build: Copy issues only ordinary stores, which
// the Go memory model and the usual atomic publication already order.
func Fence() {}

// copyNT is the builtin copy in this build.
func copyNT(dst, src []byte) { copy(dst, src) }

func implName() string { return "generic" }
