// Command xdpgen is a traffic generator over an AF_XDP socket: it writes
// every frame straight into a UMEM frame and sends them in batches.
//
// -mode says what it sends:
//
//	udp        datagrams xdprecv checks (the default; below)
//	tcp-syn    SYNs as Linux sends them (MSS, SACK-permitted, timestamps,
//	           NOP, window scale 7), a sequence number drawn per packet
//	icmp-echo  echo requests, ICMP or ICMPv6, identifier from -sport,
//	           sequence numbers 0, 1, 2, ...
//	raw        -ethertype (default 0x88b5) and -pattern repeated, to
//	           -dst-mac; no IP
//	pcap       the packets of -pcap FILE (pcap or pcapng, read as a
//	           stream, so any size replays), -loop N times (0: until
//	           stopped), at -rate or with the capture's own timing
//	           (-pcap-timing original), with this interface's MAC and the
//	           next hop's (unless -pcap-keep-macs), and with
//	           -pcap-rewrite-ip the IP addresses of -src and -dst (IPv4
//	           header and UDP, TCP and ICMPv6 checksums updated)
//
// The field engine (package craft) varies, in every mode but raw and
// pcap: the destination over a prefix (-dst 198.18.1.0/28; the address as
// written is the one routed to find the next hop), the source over a
// prefix (-src), the source and destination ports over ranges (-sport
// 10000-10999, -dport 9000-9099), in -order sequential (every combination
// once per round, the source port turning fastest) or random (-seed N
// repeats a run). -vlan 100 adds an 802.1Q tag, -vlan 100,200 QinQ
// (802.1ad outer, 802.1Q inner). These frames are written in place into
// a UMEM frame each, their checksums computed in software, and must fit
// one frame. Plain -mode udp (a single address each way and -flows
// source ports) sends through txpath's UDPFlow templates instead, with
// the copy policies, -timestamp and multi-buffer frames described below.
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
//	xdpgen -i eth0 -dst 198.18.1.2 -mode tcp-syn -sport 1024-65535 -order random -rate 1M -duration 10s
//	xdpgen -i eth0 -dst 2001:db8::/120 -mode icmp-echo -vlan 100 -count 1000
//	xdpgen -i eth0 -dst-mac 02:00:00:00:00:02 -mode raw -ethertype 0x88b5 -pattern c0ffee -size 60
//	xdpgen -i eth0 -dst 198.18.1.2 -mode pcap -pcap trace.pcapng -pcap-timing original -loop 3
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
// -size is the Ethernet frame length without the FCS (64..MTU+14, 4 bytes
// more with -vlan, one tag or two: the kernel forwards no more), a
// comma-separated list "64,594,1514" with optional weights "64:7,594:4"
// cycled in order, or "imix" (64:7,594:4,1514:1; over IPv6 the smallest
// frame is 78 bytes, the headers' size). -rate is packets per
// second ("250k", "1M"), a bit rate of frame bytes ("800Mbps", "1Gbps"),
// or "max"; -rate-layer l1 counts a bit rate on the wire, each frame 24
// bytes longer (preamble and delimiter 8, FCS 4, minimum gap 12), l2 (the
// default) the frame bytes xdpgen writes. -duration and -count apply to
// every mode. The source address and the next hop's MAC default to what
// the kernel's routing and neighbour tables say for -dst.
//
// BenchmarkModes (go test -run '^$' -bench Modes ./xdpgen, as root)
// measures each mode's send loop through veth, with its allocations.
package main
