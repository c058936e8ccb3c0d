// Package topo builds the three-namespace topology of the demo and the
// app tests:
//
//	gen-ns [In.A] ---veth--- [In.B] fwd-ns [Out.A] ---veth--- [Out.B] recv-ns
//
// with addresses from 198.18.0.0/15 and 2001:db8::/32 (one /30 and one /64
// per pair, from test/vethns), static neighbours on each pair, routes in
// gen-ns and recv-ns to the far subnet through the forwarder, and IP
// forwarding on in fwd-ns so that what the AF_XDP forwarder leaves to the
// kernel (ICMP: ping, traceroute) is still routed.
//
// TX checksum offload is turned off on the two end hosts' veths (In.A and
// Out.B). A veth hands a CHECKSUM_PARTIAL skb to its peer with only the
// pseudo-header sum in the checksum field and trusts the receiver to know
// it; once the frame crosses XDP into an AF_XDP socket and leaves through
// another interface, that knowledge is lost, as it would be on a wire. The
// end hosts therefore send finished checksums, as a real NIC would put on
// the wire.
package topo
