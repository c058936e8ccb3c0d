// Command xdprecv receives UDP traffic through an AF_XDP socket with the
// budgeted poller (rxpath), counts it and verifies it: IPv4 header and UDP
// checksums, and for xdpgen's payloads the sequence numbers per flow
// (gaps, late arrivals) and the payload pattern. It can write what arrives
// into a pcap file.
//
// The XDP program sends the UDP datagrams to -port (all UDP with -port 0)
// to the socket; everything else goes on to the kernel.
//
// Kernel: Linux 6.6 or later (AF_XDP with need_wakeup, bpf_link XDP
// attach); root or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK.
//
// Run:
//
//	xdprecv -i eth1                          # until SIGINT/SIGTERM
//	xdprecv -i eth1 -count 1000000 -pcap /tmp/rx.pcap -snaplen 128
//	xdprecv -i eth1 -port 0 -duration 10s -metrics 127.0.0.1:9103
//
// The pcap file is the libpcap format with nanosecond timestamps (24-byte
// global header, magic 0xa1b23c4d in little-endian byte order, version
// 2.4, link type 1 = Ethernet; then a 16-byte record header per packet:
// seconds, nanoseconds, captured length, original length).
package main
