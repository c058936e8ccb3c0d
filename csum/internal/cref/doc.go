// Package cref compiles bench/c/csumbench.c's kernels into a Go test
// binary through cgo, so that csum's TestPairedC can time them in
// alternating short blocks with Sum and CopyAndSum in one process: on a
// shared machine, runs of separate programs minutes apart differ by more
// than the kernels do. Built only with -tags csumcgo.
package cref
