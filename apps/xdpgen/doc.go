// Command xdpgen is a UDP traffic generator over an AF_XDP socket: it
// writes every datagram straight into UMEM frames with txpath (headers
// from a per-flow template, payload gathered from a precomputed pattern,
// checksums by the chosen copy policy) and sends them in batches.
//
// Every payload starts with a 16-byte header (magic, flow, size, sequence
// number per flow) followed by a pattern that depends on the sequence
// number, which xdprecv checks: loss, reordering, duplicates, corruption.
// With -timestamp the header has its own magic and is followed by the
// send time, CLOCK_TAI nanoseconds taken just before the datagram is
// written into its frame (package payload), from which xdprecv measures
// one-way latency on the same host (frames then are at least 8 bytes
// larger than the headers' minimum).
//
// Kernel: Linux 5.4 or later (AF_XDP TX with need_wakeup); the offload
// policy needs AF_XDP TX metadata (the XDP_UMEM_TX_METADATA_LEN flag,
// 6.11). Optional features are used where the kernel has them and the
// "kernel features" line says which (XDP_MAX_TX_SKB_BUDGET 256: 6.17; the
// netdev genetlink family: 6.3); see the README's kernel table. Root or
// CAP_NET_ADMIN, CAP_NET_RAW and CAP_IPC_LOCK. No XDP program is needed to
// send.
//
// The default policy is right for every receiver: on a software device
// (veth, macvlan, bridge, tun/tap, ...) it sums in software, because an
// offloaded checksum would leave the device unfinished and an XDP or
// AF_XDP receiver would see it so. -policy offload there does what it
// says, with a warning.
//
// Run:
//
//	xdpgen -i eth0 -dst 198.18.1.2 -rate 100k -count 1000000
//	xdpgen -i eth0 -dst 2001:db8::2 -size imix -flows 16 -rate 500Mbps -duration 10s
//	xdpgen -i eth0 -dst 198.18.1.2 -rate max -size 64 -policy software
//	xdpgen -i eth0 -dst 198.18.1.2 -queues 4 -flows 16 -rate 1M  # 4 pinned threads, flow f on queue f mod 4
//	xdpgen -i eth0 -dst 198.18.1.2 -size 9014                     # jumbo frames, as multi-buffer chains
//
// With -queues each queue has its own socket, UMEM, Sender and pinned
// thread (package mq); flow f is sent on the f-th queue modulo their
// number (-flows is raised to the number of queues), and the rate and
// -count are split evenly between the queues. Frames larger than one
// 2048-byte UMEM frame leave as multi-buffer chains (XDP_USE_SG, Linux
// 6.6+).
//
// xdpgen never reports success for frames that did not leave: every frame
// it sends must come back on the completion ring. When frames are in
// flight and none completes for -stall (5 s), the send loop stops with
// "TX stalled"; frames still not completed -stall after the run are
// reported (NotCompleted in the summary), and either makes xdpgen exit 1.
// -duration is the time spent sending, counted from the end of set-up
// (binding a NIC in zero-copy mode may take seconds).
//
// -size is the Ethernet frame length without the FCS (64..MTU+14), a
// comma-separated list "64,594,1514" with optional weights "64:7,594:4"
// cycled in order, or "imix" (64:7,594:4,1514:1; over IPv6 the smallest
// frame is 78 bytes, the headers' size). -rate is packets per
// second ("250k", "1M"), a bit rate of frame bytes ("800Mbps", "1Gbps"),
// or "max". The source address and the next hop's MAC default to what
// the kernel's routing and neighbour tables say for -dst.
package main
