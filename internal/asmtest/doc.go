// Package asmtest holds what the tests of xdpkit's assembly kernels (csum,
// nt) share: the CPU's feature flags read from /proc/cpuinfo, a source
// independent of golang.org/x/sys/cpu, so that a test can fail when a
// kernel the CPU can run is not tested; and memory that ends and starts at
// a PROT_NONE page, so that a kernel that reads or writes one byte outside
// its slices faults. It is for tests only, and only on Linux.
package asmtest
