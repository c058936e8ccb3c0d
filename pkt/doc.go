// Package pkt parses and rewrites packet headers in place: Ethernet with up
// to two VLAN tags, IPv4 (with options), IPv6 (with extension headers), UDP,
// TCP and ICMP/ICMPv6. It is what xdpkit's own apps use on every packet.
//
// Parse fills a Frame with the offsets, addresses and ports of a frame
// received from an AF_XDP socket (rxpath.Packet.Data). It never allocates
// and never reads outside the slice it is given; every length it reports is
// checked against the slice.
//
//	var f pkt.Frame
//	if err := pkt.Parse(p.Data, &f); err != nil || f.Proto != pkt.ProtoUDP {
//		return // not for us
//	}
//	payload := f.Payload(p.Data)
//
// ReplyUDP turns a received UDP datagram into its reply where it lies:
// Ethernet addresses, IP addresses and ports swapped, the TTL or hop limit
// reset, and the IPv4 header and UDP checksums computed again in full, so
// the reply is right whatever checksum the request carried (also a partial
// one, from a peer that offloads its transmit checksums). DecTTL and SetMACs
// are what a forwarder needs; DecTTL updates the IPv4 header checksum
// incrementally (RFC 1624) rather than summing the header again.
package pkt
