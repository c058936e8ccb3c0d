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
// NAPIs, SetNAPI and Queues are the netdev family's napi-get, napi-set and
// queue-get (Linux 6.8+, napi-set 6.13+, irq-suspend-timeout 6.14+): the
// per-NAPI knobs busy polling tunes (defer-hard-irqs, gro-flush-timeout,
// irq-suspend-timeout) and which NAPI polls which queue. A call the kernel
// lacks returns an *UnsupportedError (errors.ErrUnsupported).
//
// Generic netlink goes through github.com/mdlayher/genetlink and
// github.com/mdlayher/netlink (genl.go), which zero the genlmsghdr's
// reserved field. vishvananda/netlink does not: its nl.Genlmsg is a 2-byte
// Go struct serialized as the 4-byte header, so families generated from
// YNL specs, such as netdev, which validate strictly, reject its requests
// ("genlmsghdr.reserved field is not 0"). Two habits of the netdev family
// shape genl.go: its dump replies lack NLM_F_MULTI, so a dump is read until
// nothing more is queued rather than trusting the flag; and a "do" with a
// reply asks for no ACK (the library reads one datagram per request).
// Adding a netdev call is a command number, the attribute numbers from the
// kernel's Documentation/netlink/specs/netdev.yaml, and a parser over
// netlink.AttributeDecoder. Every call asks from the device's own
// namespace: ifindexes are per namespace, and the same index in another
// namespace is another device or none (ENODEV).
package netdev
