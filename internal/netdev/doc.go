// Package netdev reads the facts about a network device that the TX and RX
// paths need: driver, queue counts, MTU, TX checksum offload state, and the
// XDP/AF_XDP feature bits the kernel advertises.
//
// Every function works on the network namespace of the calling thread, so a
// test calls them from inside vethns.NS.Do; ifindexes are only meaningful
// within one namespace.
//
// Sources, in order of preference:
//
//   - XDP, XDP RX metadata and XSK features and the zero-copy segment limit
//     come from the "netdev" generic-netlink family (Linux 6.3+;
//     XSK features 6.8+). When the family is missing, these fields stay 0
//     and Info.FeaturesFrom says "ethtool": only the ethtool facts are known.
//   - Driver, queue counts and TX checksum offload come from the ethtool
//     ioctl (SIOCETHTOOL: ETHTOOL_GDRVINFO, ETHTOOL_GCHANNELS through
//     github.com/safchain/ethtool,
//     ETHTOOL_GTXCSUM); queue counts fall back to rtnetlink's
//     IFLA_NUM_RX_QUEUES/IFLA_NUM_TX_QUEUES when the driver does not report
//     channels (those are the allocated counts, which can exceed the real
//     ones).
//
// Why the netdev family "did not answer" a first probe on veth: it did
// answer, with EINVAL and the extended ack "genlmsghdr.reserved field is
// not 0". vishvananda/netlink's nl.Genlmsg is a 2-byte Go struct serialized
// as the 4-byte genlmsghdr by an unsafe cast, so the reserved field is
// whatever two bytes follow it in memory. Older genetlink families are
// registered with GENL_DONT_VALIDATE_STRICT and ignore the field (which is
// why resolving the family through the "nlctrl" family works), but families
// generated from YNL specs, such as netdev, validate strictly and reject
// the request, for every device, not only veth. That library also stops
// reading a dump after the first message when the message lacks
// NLM_F_MULTI, which the netdev family's dump replies lack on this kernel,
// so a dump showed only "lo". This package therefore speaks generic netlink
// itself (genl.go): a zeroed header, a "do" request with NLM_F_ACK, replies
// read until the ACK or NLMSG_DONE. It also asks from the device's own
// namespace: ifindexes are per namespace, and the same index in another
// namespace is another device or none (ENODEV).
package netdev
