// Package cbench holds xdpbench, the C reference program that xdpkit's
// AF_XDP benchmarks are compared with (xdpbench.c, built by build.sh with
// the system's gcc against the kernel's uapi headers, without libbpf), and
// the tests that build it and run each of its modes on veth pairs in
// network namespaces. wakebench.c, also built by build.sh, is the C half
// of make bench's wake-up cost comparison (bench/wakebench has the Go
// half and the waker): it sleeps in poll(2) on a named pipe.
// xsksample.c, also built by build.sh (against libxdp and libbpf: Debian's
// libxdp-dev and libbpf-dev), is our own program in the shape of the
// AF_XDP sample that C users benchmark with, xdpsock: its rxdrop (-r),
// txonly (-t) and l2fwd (-l) modes, command line, defaults, loops and
// statistics blocks; the tests run each mode on veth pairs.
//
// xdpbench's modes are txonly (and its alias gen), sink (XDP_DROP), rxdrop
// and fwd; each prints one JSON line such as
//
//	{"mode":"txonly","frames":N,"seconds":S,"mpps":X,...}
//
// Run the tests (root, gcc) and the measurements with
//
//	go test ./bench/c/
//	go test ./bench/c/ -run '^$' -bench . -count 3
//
// XDPBENCH_SECONDS sets the length of one benchmark run (default 2) and
// XDPBENCH_PIN=1 pins the generator to CPU 0 and the receiver to CPU 1. The
// package has no Go API; `make bench` drives the binary.
package cbench
