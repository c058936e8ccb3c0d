// Package pkt parses and rewrites the packet headers that xdpkit's apps
// handle: Ethernet with up to two VLAN tags, IPv4 (with options), IPv6
// (with extension headers), UDP, TCP and ICMP/ICMPv6.
//
// Parse never allocates and never reads outside the slice it is given;
// every length it reports is checked against the slice. The rewrite
// helpers (TTL and hop-limit decrement, MAC rewrite) update checksums
// incrementally (RFC 1624) rather than summing the packet again.
package pkt
