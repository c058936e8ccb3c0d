// Package craft builds the frames xdpgen sends in its synthetic modes
// (UDP, TCP SYN, ICMP echo, raw EtherType) straight into a caller's
// buffer, usually a UMEM frame: a header template made once, then per
// packet a copy of the template, the fields the field engine chooses, the
// payload and the checksums. Nothing is allocated per packet.
//
// The field engine varies four fields over ranges: the source and
// destination addresses (a prefix: every address in it, network and
// broadcast addresses included) and the source and destination ports (an
// inclusive range; for ICMP echo the source-port range gives the
// identifier). Order Sequential walks every combination like an odometer,
// the source port turning fastest, then the destination port, the source
// address and the destination address; Order Random draws each field
// uniformly from a PCG generator seeded with Config.Seed, so a run is
// repeatable.
//
// Frames:
//
//   - UDP: the payload is xdprecv's format (package payload): a 16-byte
//     header with Config.Flow and a per-Builder sequence number, then the
//     pattern of that sequence number.
//   - TCP SYN: what Linux sends to connect: DF, TTL 64, window
//     65535 rounded down to a multiple of the MSS, and the options MSS,
//     SACK-permitted, timestamps (TSval counts packets from a random start,
//     TSecr 0), NOP, window scale 7; 20 bytes of options, a 74-byte frame
//     over IPv4 and 94 over IPv6 without VLAN tags. The sequence number is
//     drawn for each packet from the generator.
//   - ICMP echo: echo request (ICMP type 8, ICMPv6 type 128, the ICMPv6
//     checksum over the pseudo-header), the sequence number counting per
//     Builder, the payload incrementing bytes.
//   - Raw: the Ethernet header with Config.EtherType, then Config.Pattern
//     repeated to the frame's length.
//
// Up to two VLAN tags go between the MAC addresses and the EtherType:
// one is 802.1Q (TPID 0x8100); two are QinQ, the first (outer) 802.1ad
// (0x88a8) and the second 802.1Q. Frame lengths (Config.Sizes) are
// Ethernet lengths without the FCS, cycled in order.
package craft
