package xsk

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/xdpkit/xdpkit/internal/xdpprog"
)

// Filter fields beyond protocols, destination ports and PassDst:
//
//   - DstPortRanges adds inclusive ranges to DstPorts.
//   - SrcPorts and SrcPortRanges, if either is not empty, restrict
//     redirection to these UDP/TCP source ports: the replies a DNS client,
//     a scanner or a health checker waits for. With any port field, every
//     IPv4 fragment goes to the kernel.
//   - SrcPrefixes and DstPrefixes, if not empty, restrict redirection to
//     packets whose source (destination) address lies in one of the
//     prefixes; a packet of a family with no prefix in a non-empty list
//     goes to the kernel. At most MaxPrefixes each.
//   - VLANs, if not empty, restricts redirection to frames with one 802.1Q
//     or 802.1ad tag whose VLAN ID is listed; untagged frames go to the
//     kernel. A tag the NIC strips on receive (ethtool -k, rx-vlan-offload)
//     is not in the frame the program sees: turn the offload off
//     (ethtool -K IFACE rxvlan off) to filter on it.
//   - EtherTypes lists non-IP EtherTypes whose frames are redirected whole
//     (after at most one VLAN tag). With EtherTypes and none of the
//     protocol, port and prefix fields set, no IP packet is redirected.
//     IPv4, IPv6, VLAN TPIDs and lengths (below 0x0600) are refused. At
//     most MaxEtherTypes.
//   - Management keeps the host's management traffic in the kernel
//     whatever else matches: ARP, TCP from or to port 22 (SSH) and every
//     IPv4 fragment. Neighbour discovery and other ICMP never match. The
//     host's own addresses go in PassDst; KeepManagement fills both.

// Limits of the list fields of a Filter.
const (
	MaxPrefixes   = xdpprog.MaxPrefixes   // per prefix list
	MaxVLANs      = xdpprog.MaxVLANs      // VLAN IDs
	MaxEtherTypes = xdpprog.MaxEtherTypes // EtherTypes
)

// PortRange is an inclusive range of UDP/TCP ports.
type PortRange struct{ First, Last uint16 }

// prog converts f for the program builder; nil stays nil.
func (f *Filter) prog() *xdpprog.Filter {
	if f == nil {
		return nil
	}
	ranges := func(rs []PortRange) []xdpprog.PortRange {
		out := make([]xdpprog.PortRange, len(rs))
		for i, r := range rs {
			out[i] = xdpprog.PortRange{First: r.First, Last: r.Last}
		}
		return out
	}
	return &xdpprog.Filter{
		IPv4UDP: f.IPv4UDP, IPv6UDP: f.IPv6UDP, IPv4TCP: f.IPv4TCP, IPv6TCP: f.IPv6TCP,
		DstPorts: f.DstPorts, PassDst: f.PassDst,
		DstPortRanges: ranges(f.DstPortRanges),
		SrcPorts:      f.SrcPorts, SrcPortRanges: ranges(f.SrcPortRanges),
		SrcPrefixes: f.SrcPrefixes, DstPrefixes: f.DstPrefixes,
		VLANs: f.VLANs, EtherTypes: f.EtherTypes, Management: f.Management,
	}
}

// KeepManagement returns a copy of f (nil: a Filter that selects UDP and
// TCP over IPv4 and IPv6) that keeps the host's management traffic in the
// kernel: Management set, and every address of the calling thread's
// network namespace (all interfaces, loopback included) added to
// PassDst. It fails when the addresses cannot be read or are more than
// MaxPassDst.
func KeepManagement(f *Filter) (*Filter, error) {
	var c Filter
	if f != nil {
		c = *f
		c.PassDst = slices.Clone(f.PassDst)
	}
	c.Management = true
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("xsk: read the host's addresses: %w", err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok && !slices.Contains(c.PassDst, ip.Unmap()) {
			c.PassDst = append(c.PassDst, ip.Unmap())
		}
	}
	if len(c.PassDst) > MaxPassDst {
		return nil, fmt.Errorf("xsk: the host has %d addresses, more than the %d PassDst holds", len(c.PassDst), MaxPassDst)
	}
	return &c, nil
}
