// Command xdpfwd forwards packets between two interfaces (or back out of
// one) through AF_XDP sockets without copying their payload: the RX and TX
// sockets share one UMEM, so a received frame is rewritten in place and
// put on the other socket's TX ring.
//
// Modes:
//
//	-mode l3  (default) IPv4 TTL / IPv6 hop-limit decrement (the IPv4 header
//	          checksum updated incrementally, RFC 1624), next-hop MAC from the
//	          kernel's routing and neighbour tables (rtnetlink, cached).
//	          Packets whose TTL would expire are answered with ICMP time
//	          exceeded by the forwarder (rate-limited) and counted.
//	-mode l2  MAC rewrite only: destination from -dst-mac, or learned from
//	          the source MAC of the traffic arriving on the out-interface.
//
// The XDP program sends only IPv4/IPv6 UDP and TCP to the sockets, and
// never packets addressed to the namespace's own addresses: ARP, neighbour
// discovery, ICMP (ping) and traffic to the host reach the kernel as
// usual (with IP forwarding on, the kernel routes ICMP itself). Every
// packet the forwarder does not send on is counted by reason.
//
// -max-pps caps the forwarding rate (police.go): a token bucket of
// -max-burst packets (default 50 ms at the rate, at least 64) lets at
// most that many packets a second through, shared out among the queues,
// and drops the rest (the summary's Policed). It makes a bottleneck of
// known rate, which xdpndr's test finds. The bucket is refilled by each
// packet's arrival time, the XDP program's clock in its RX metadata
// (rxpath.Packet.XDPTime), so packets that waited on the RX ring while the
// forwarder was descheduled are not taken for a burst; without metadata
// (the ready message says), by the time of the poll round. A sender's
// burst (a generator catching up after a stall) must fit in the bucket,
// and a run of T seconds at a rate above -max-pps loses nothing until its
// excess passes -max-burst (-max-burst / T above the rate).
//
// Kernel: Linux 6.6 or later (AF_XDP with need_wakeup and bpf_link XDP
// attach; 6.8+ for TX metadata, which xdpfwd does not need), root or
// CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK. veth works in
// copy mode.
//
// Run:
//
//	xdpfwd -i eth1 -o eth2                 # L3, both directions
//	xdpfwd -i eth1 -o eth2 -mode l2 -dst-mac 02:00:00:00:00:02
//	xdpfwd -i eth1 -metrics 127.0.0.1:9101 # hairpin, Prometheus on /metrics
//	xdpfwd -i eth1 -o eth2 -queues 4 -cpus 2-5 # queue i of eth1 <-> queue i of eth2, one pinned thread each
//
// With -queues every queue has its own thread pinned to its own CPU, its
// own UMEM (shared by its two sockets, so frames move between the
// interfaces without a copy) and its own counters (package mq); the
// status line shows each queue's rate and the summary each queue's
// counters. Jumbo frames (MTU above 1770 with 2048-byte frames) are
// received and forwarded as multi-buffer chains, the headers rewritten in
// the first buffer.
//
// A UDP or TCP checksum that a sender behind a software device (veth)
// left partial (tx checksum offload: the field holds the pseudo-header
// sum) is finished before the frame goes out, in a multi-buffer chain
// too, as the kernel's forwarding path would; the summary counts them
// (PartialFinished). An IPv6 packet with extension headers is left as it
// is.
//
// The receive poller never naps by default: it polls through short gaps
// and sleeps until the socket is readable through long ones, so a packet
// waits at most a sleep's wake-up, as for a C receiver in poll(2).
// -max-delay sets a delay budget (rxpath.Config.MaxDelay): within it the
// poller naps while packets flow (rxpath.Config.Coalesce, by default 4 of
// the host's measured sleep costs, cut to the budget), for fewer wake-ups
// and less CPU per packet at moderate rates, and a packet may wait up to a
// nap on the ring. -coalesce sets the nap's timer (alone,
// it is its own budget; with a negative -max-delay it is refused; naps are
// still skipped while they overrun on a contended CPU); -coalesce -1ns or
// a negative -max-delay never naps.
// While packets flow, the poller sleeps in ppoll on its own thread, as a C
// receiver sleeps in poll(2), holding its thread and P meanwhile;
// -runtime-sleep makes it sleep in the Go runtime's poller instead
// (rxpath.Config.RuntimeSleep): the P is free during every sleep, at more
// CPU per wake-up.
// The poller reads the cache lines of every packet's headers (its first
// 128 bytes) for a whole batch before the forwarder parses the first
// packet (rxpath.Config.Prefetch): the kernel wrote
// the frames on another CPU, and the batch's cache misses then overlap
// instead of stalling the parser once per packet. A poll round that
// took packets and leaves fewer than 32 to send (copy mode's TX budget,
// what one kick sends) keeps them for the next round, which the poller
// runs at once; a round that found nothing sends everything. While
// traffic flows that is one kick per 32 frames rather than one per
// round, however few packets the round took.
//
// It prints one status line per second and a final summary (a line
// "summary {json}") on SIGINT or SIGTERM, after detaching the XDP
// programs and checking that every UMEM frame came back.
package main
