// Package apps holds xdpkit's programs and their namespace tests:
//
//	xdpfwd   forwards between two interfaces without copying payload (L2 or L3)
//	xdpgen   UDP traffic generator (rate, size mix, flows, copy policy)
//	xdprecv  counts and verifies what arrives, optionally into a pcap file
//	         (-json: a JSON line per second for scripts)
//	xdpndr   the highest rate with loss within a bound (NDR, PDR), by
//	         trials of xdpgen against xdprecv (`make ndr`)
//	xdpdemo  builds a generator -> forwarder -> receiver namespace topology,
//	         runs the three for a few seconds and prints a summary table
//	         (`make demo`; -bench measures the forwarder flat out)
//
// The tests in this directory build the programs once (TestMain) and run
// them inside network namespaces made by test/vethns.
package apps
