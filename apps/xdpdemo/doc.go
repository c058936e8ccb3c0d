// Command xdpdemo shows xdpkit end to end on a machine of its own making:
// it builds three network namespaces joined by two veth pairs
//
//	gen-ns --veth-- fwd-ns --veth-- recv-ns     (198.18.0.0/15, 2001:db8::/32)
//
// runs xdprecv in recv-ns, xdpfwd (L3) in fwd-ns and xdpgen in gen-ns for a
// few seconds at a bounded rate, prints a summary table (sent, forwarded,
// received, lost, Mpps, the copy policy xdpgen chose and why) and removes
// everything again, also when interrupted with Ctrl-C or SIGTERM.
//
// With -bench it sends 64-byte frames flat out instead and reports the
// packets counted and dropped at every stage: generator, both veth pairs,
// forwarder, receiver.
//
// With -queues N every veth has N queues and the three programs serve all
// of them, one pinned thread per queue each (xdpgen spreads its flows
// over the queues, xdpfwd forwards queue i to queue i); the report adds
// a table with each queue's share and the CPU time of each queue's
// thread (make demo-mq: 2 queues).
//
// With -soak it runs for -duration (up to 24h) while flapping the
// forwarder's links down and up every -flap, reports every loss stage by
// stage, and the forwarder's memory (VmRSS) and open file descriptors
// near the start and at the end; it fails when either grew (make soak).
//
// Kernel: Linux 6.6 or later with veth and network namespaces; run as
// root. It needs iproute2's ip and the other three programs, built next to
// it (or in -bin):
//
//	(cd apps && go build -o /tmp/xdpkit/ ./...) && sudo /tmp/xdpkit/xdpdemo
//	make demo
//	sudo /tmp/xdpkit/xdpdemo -bench -duration 5s
package main
