// Package nexthop finds the next-hop MAC address and interface for a
// destination from the kernel's routing and neighbour tables (rtnetlink),
// with a small cache so that a forwarder asks the kernel once per
// destination and second, not once per packet.
package nexthop
