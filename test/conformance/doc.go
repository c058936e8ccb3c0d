// Package conformance runs the kernel's own AF_XDP test suite
// (tools/testing/selftests/bpf/prog_tests/test_xsk.c, formerly
// xskxceiver.c) against xdpkit's public API: one Go test per kernel test
// case, named after it, each checking what the kernel's version checks
// (packet counts, in-order delivery, payload bytes, RX offsets, the
// XDP_STATISTICS counters), in each of the suite's modes as subtests:
//
//	SKB  generic XDP, copy mode, on a veth pair
//	DRV  native XDP, copy mode, on a veth pair
//
// The modes are data (modes in harness_test.go); a device pair comes from
// one helper, newDevices, so another mode (zero-copy on a NIC pair) runs
// the same cases.
//
// The package has tests only. Run it as root:
//
//	go test -count=1 -v ./test/conformance/
package conformance
