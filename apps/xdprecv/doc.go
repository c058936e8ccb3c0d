// Command xdprecv receives UDP traffic through an AF_XDP socket with the
// budgeted poller (rxpath), counts it and verifies it: IPv4 header and UDP
// checksums, and for xdpgen's payloads the sequence numbers per flow
// (gaps, late arrivals) and the payload pattern. It can write what arrives
// into a pcap file.
//
// The XDP program sends the UDP datagrams to -port (all UDP with -port 0)
// to the socket; everything else goes on to the kernel.
//
// Other traffic (proto.go): -tcp also takes TCP (to -port; all TCP with
// -port 0) and -ethertype LIST frames of those non-IP EtherTypes; -all
// takes every frame on the queue (no filter: the XDP filter cannot select
// ICMP, so ICMP and ICMPv6 echoes need it; ARP and neighbour discovery
// then reach xdprecv, not the kernel). These are counted by kind in the
// summary's Proto: TCP SYNs (and their distinct flows), SYN-ACKs, other
// TCP; ICMP and ICMPv6 echo requests and replies (and their flows by
// identifier); frames by EtherType. Their checksums are verified (IPv4
// header, TCP, ICMP, ICMPv6), bad ones counted apart.
//
// Duplicates: a sequence number that arrives again within the last 64 of
// its flow is counted as a duplicate (Duplicates), not as reordered
// (Reordered = Late - Duplicates), and does not hide a loss.
//
// -json makes standard output JSON lines for scripts (stream.go): a
// "ready" line, an "interval" line per second (packets, bytes, rates,
// valid, lost, reordered, duplicates, bad checksums, bad payloads, XDP
// drops, the Proto counts and, with -latency, that second's latency
// percentiles) and the "summary" line at the end, each an object with a
// Type; the human lines go to stderr.
//
//	xdprecv -i eth1 -json -duration 10s | jq -c 'select(.Type=="interval") | [.PPS, .Lost]'
//	xdprecv -i eth1 -all -json               # SYNs, echoes and raw frames too
//
// Kernel: Linux 6.6 or later (AF_XDP with need_wakeup); the XDP program is
// attached as a bpf_link (5.9), through rtnetlink on kernels without XDP
// links; the "kernel features" line says what was used. Root or
// CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK.
//
// A UDP checksum field that holds the pseudo-header sum (a sender behind a
// software device offloaded it and nothing finished it) is counted as
// PartialUDPCsum, not as bad, and the datagram is checked further.
//
// Run:
//
//	xdprecv -i eth1                          # until SIGINT/SIGTERM
//	xdprecv -i eth1 -count 1000000 -pcap /tmp/rx.pcap -snaplen 128
//	xdprecv -i eth1 -port 0 -duration 10s -metrics 127.0.0.1:9103
//	xdprecv -i eth1 -queues 4 -cpus 0-3      # one pinned thread per queue
//
// -latency measures the one-way latency of xdpgen -timestamp payloads
// (same host): it attaches the XDP program with RX metadata (package
// rxpath, Config.Metadata) and subtracts the send time in the payload
// from the device's RX timestamp, else the XDP program's CLOCK_TAI time,
// else its own clock (-latency-clock auto|device|xdp|user), into an
// HdrHistogram per queue; the summary and -metrics carry p50, p99, p99.9
// and max (latency.go). The "latency" line at start says what metadata
// the kernel and the device gave.
//
//	xdprecv -i eth1 -latency                 # with xdpgen -timestamp on the same host
//
// With -queues each queue has its own socket, UMEM, thread and counters
// (package mq); a flow is checked for gaps on the queue it arrives on.
// Jumbo frames (MTU above 1770) arrive as multi-buffer chains and are
// checked whole.
//
// The pcap file is the libpcap format with nanosecond timestamps (24-byte
// global header, magic 0xa1b23c4d in little-endian byte order, version
// 2.4, link type 1 = Ethernet; then a 16-byte record header per packet:
// seconds, nanoseconds, captured length, original length).
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
//
// -napi-defer N -napi-gro-flush D set the interface's NAPI deferral while
// xdprecv runs (xsk.SetNAPIDeferral: netdev napi-set on Linux 6.13 and
// later, the device's sysfs files before; the ready message says which):
// the kernel then hands the RX ring batches, and the poller wakes once per
// batch, at up to D of added latency. xdprecv puts the old settings back
// when it stops (not when killed, nor on a second SIGINT). Deferral
// settings are the device's, shared with anything else that receives on
// it. With -xdp-mode generic a veth has no NAPI instance (unless GRO is
// on): the sysfs values are then set and change nothing xdprecv sees.
package main
