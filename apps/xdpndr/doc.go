// Command xdpndr finds the highest rate a path forwards with its loss
// within a bound: the NDR (no drop rate, -loss 0) or a PDR (partial drop
// rate, e.g. -loss 0.5 in percent), as RFC 2544's throughput test and
// TRex's or fd.io CSIT's searches do, with xdpgen as the tester's sender
// and xdprecv as its receiver.
//
// Each trial starts a fresh xdprecv -json -count N on the receiver's
// interface and waits for its ready line, then runs xdpgen -rate R
// -count N (N = R x -trial) on the generator's interface; the receiver
// exits by itself once it has counted N valid packets, else it is
// stopped -drain after the generator's exit. Loss is counted by the
// receiver, independently of the generator: the generator's Sent less
// the receiver's Valid (duplicates left out). A trial passes when the
// loss is at most -loss and the generator reached the rate (within 5%:
// a trial it could not drive says nothing about the path at that rate).
//
// The search (search.go, tested with synthetic devices in
// search_test.go) tries -start (default -max) first, then halves the
// interval between the highest rate that passed and the lowest that
// failed until it is no wider than -resolution (a percentage of the upper
// bound, or packets/s), in at most -max-trials trials; -retries N runs a
// failed trial again up to N times (the rate passes if one attempt
// does), for hosts whose other work makes the path drop now and then.
// Every trial and
// the result are JSON lines on standard output; progress and errors go
// to stderr.
//
// The programs run where the flags say: -gen-ns and -recv-ns are `ip
// netns` names (the programs are run through `ip netns exec`), empty for
// xdpndr's own namespace; -bin is the directory holding xdpgen and
// xdprecv (default: xdpndr's own). -topo builds the demo's topology
// instead (package topo: gen-ns -> xdpfwd -> recv-ns on veth, uniquely
// named namespaces, removed at the end and on failure), runs xdpfwd in
// the middle (with -fwd-args) and searches through it; `make ndr` runs
// that.
//
// Kernel and privileges: those of xdpgen and xdprecv (Linux 6.6 or
// later; root or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK); -topo
// needs root.
//
// Run:
//
//	xdpndr -topo                                  # the NDR of xdpfwd on veth
//	xdpndr -topo -loss 0.5 -trial 5s -resolution 1%
//	xdpndr -gen-ns a -gen-i veth0 -dst 198.18.1.2 -recv-ns b -recv-i veth1 -max 2M
package main
