package xdpprog

import (
	"fmt"
	"net/netip"
	"slices"
)

// portBitmapSize is the size of one port bitmap: one bit per UDP/TCP
// port. The port map's single value holds the destination bitmap, then the
// source bitmap.
const portBitmapSize = 65536 / 8

// Limits of the list-shaped Filter fields, so that the generated program
// stays small (each entry is a few compare instructions).
const (
	// MaxPrefixes is the most prefixes in Filter.SrcPrefixes and in
	// Filter.DstPrefixes, each.
	MaxPrefixes = 64
	// MaxVLANs is the most VLAN IDs in Filter.VLANs.
	MaxVLANs = 64
	// MaxEtherTypes is the most EtherTypes in Filter.EtherTypes.
	MaxEtherTypes = 16
)

// EtherTypes the Management preset keeps in the kernel, and the ports.
const (
	ethPARP = 0x0806
	portSSH = 22
)

// filter is a validated, normalised Filter as the assembler consumes it.
type filter struct {
	udp4, tcp4, udp6, tcp6 bool
	dstBits, srcBits       []byte     // port bitmaps; nil: any port
	pass4                  [][4]byte  // sorted, unique
	pass6                  [][16]byte // sorted, unique
	src4, dst4             []netip.Prefix
	src6, dst6             []netip.Prefix
	srcPfx, dstPfx         bool     // the field was set (a family without prefixes then never matches)
	vlans                  []uint16 // sorted, unique
	etypes                 []uint16 // sorted, unique
	mgmt                   bool
}

func (f *filter) v4() bool { return f.udp4 || f.tcp4 }
func (f *filter) v6() bool { return f.udp6 || f.tcp6 }

// anyPorts reports whether the program reads L4 ports, which makes it send
// every IPv4 fragment to the kernel.
func (f *filter) anyPorts() bool { return f.dstBits != nil || f.srcBits != nil || f.mgmt }

// newFilter validates f and normalises it; nil stays nil.
func newFilter(f *Filter) (*filter, error) {
	if f == nil {
		return nil, nil
	}
	n := &filter{udp4: f.IPv4UDP, tcp4: f.IPv4TCP, udp6: f.IPv6UDP, tcp6: f.IPv6TCP, mgmt: f.Management}
	if !n.udp4 && !n.tcp4 && !n.udp6 && !n.tcp6 && (len(f.EtherTypes) == 0 || f.selectsIP()) {
		n.udp4, n.tcp4, n.udp6, n.tcp6 = true, true, true, true
	}
	var err error
	if n.dstBits, err = portBits("DstPorts", f.DstPorts, f.DstPortRanges); err != nil {
		return nil, err
	}
	if n.srcBits, err = portBits("SrcPorts", f.SrcPorts, f.SrcPortRanges); err != nil {
		return nil, err
	}

	if len(f.PassDst) > MaxPassDst {
		return nil, fmt.Errorf("%w: %d PassDst addresses, at most %d", ErrInvalidConfig, len(f.PassDst), MaxPassDst)
	}
	for _, a := range f.PassDst {
		if !a.IsValid() {
			return nil, fmt.Errorf("%w: invalid PassDst address %v", ErrInvalidConfig, a)
		}
		a = a.Unmap().WithZone("")
		if a.Is4() {
			n.pass4 = append(n.pass4, a.As4())
		} else {
			n.pass6 = append(n.pass6, a.As16())
		}
	}
	slices.SortFunc(n.pass4, func(a, b [4]byte) int { return netip.AddrFrom4(a).Compare(netip.AddrFrom4(b)) })
	n.pass4 = slices.Compact(n.pass4)
	slices.SortFunc(n.pass6, func(a, b [16]byte) int { return netip.AddrFrom16(a).Compare(netip.AddrFrom16(b)) })
	n.pass6 = slices.Compact(n.pass6)

	if n.src4, n.src6, err = prefixes("SrcPrefixes", f.SrcPrefixes); err != nil {
		return nil, err
	}
	if n.dst4, n.dst6, err = prefixes("DstPrefixes", f.DstPrefixes); err != nil {
		return nil, err
	}
	n.srcPfx, n.dstPfx = len(f.SrcPrefixes) > 0, len(f.DstPrefixes) > 0
	// A family without a prefix in a non-empty list never matches.
	if n.srcPfx && len(n.src4) == 0 || n.dstPfx && len(n.dst4) == 0 {
		n.udp4, n.tcp4 = false, false
	}
	if n.srcPfx && len(n.src6) == 0 || n.dstPfx && len(n.dst6) == 0 {
		n.udp6, n.tcp6 = false, false
	}

	if len(f.VLANs) > MaxVLANs {
		return nil, fmt.Errorf("%w: %d VLAN IDs, at most %d", ErrInvalidConfig, len(f.VLANs), MaxVLANs)
	}
	for _, v := range f.VLANs {
		if v > 4095 {
			return nil, fmt.Errorf("%w: VLAN ID %d not in [0, 4095]", ErrInvalidConfig, v)
		}
	}
	n.vlans = slices.Compact(slices.Sorted(slices.Values(f.VLANs)))

	if len(f.EtherTypes) > MaxEtherTypes {
		return nil, fmt.Errorf("%w: %d EtherTypes, at most %d", ErrInvalidConfig, len(f.EtherTypes), MaxEtherTypes)
	}
	for _, e := range f.EtherTypes {
		switch {
		case e < 0x0600:
			return nil, fmt.Errorf("%w: EtherType %#04x is a length (below 0x0600)", ErrInvalidConfig, e)
		case e == ethPIPv4 || e == ethPIPv6:
			return nil, fmt.Errorf("%w: EtherType %#04x is IP, which the protocol, port and prefix fields select", ErrInvalidConfig, e)
		case e == ethP8021Q || e == ethP8021AD:
			return nil, fmt.Errorf("%w: EtherType %#04x is a VLAN tag, which VLANs selects", ErrInvalidConfig, e)
		}
	}
	n.etypes = slices.Compact(slices.Sorted(slices.Values(f.EtherTypes)))
	if !n.v4() && !n.v6() && len(n.etypes) == 0 {
		return nil, fmt.Errorf("%w: the filter matches no packet (its prefixes leave no selected IP version)", ErrInvalidConfig)
	}
	return n, nil
}

// selectsIP reports whether f has a field that only IP packets can match.
func (f *Filter) selectsIP() bool {
	return len(f.DstPorts)+len(f.DstPortRanges)+len(f.SrcPorts)+len(f.SrcPortRanges)+
		len(f.SrcPrefixes)+len(f.DstPrefixes) > 0
}

// portBits returns the bitmap of ports and ranges, nil when both are empty.
func portBits(field string, ports []uint16, ranges []PortRange) ([]byte, error) {
	if len(ports) == 0 && len(ranges) == 0 {
		return nil, nil
	}
	b := make([]byte, portBitmapSize)
	for _, p := range ports {
		b[p>>3] |= 1 << (p & 7)
	}
	for _, r := range ranges {
		if r.First > r.Last {
			return nil, fmt.Errorf("%w: %s range %d-%d: first above last", ErrInvalidConfig, field, r.First, r.Last)
		}
		for p := int(r.First); p <= int(r.Last); p++ {
			b[p>>3] |= 1 << (p & 7)
		}
	}
	return b, nil
}

// prefixes validates a prefix list and splits it by family, masked and
// without duplicates. IPv4-mapped IPv6 prefixes of at least 96 bits are
// treated as IPv4.
func prefixes(field string, ps []netip.Prefix) (v4, v6 []netip.Prefix, err error) {
	if len(ps) > MaxPrefixes {
		return nil, nil, fmt.Errorf("%w: %d %s, at most %d", ErrInvalidConfig, len(ps), field, MaxPrefixes)
	}
	for _, p := range ps {
		if !p.IsValid() {
			return nil, nil, fmt.Errorf("%w: invalid %s entry %v", ErrInvalidConfig, field, p)
		}
		a := p.Addr().WithZone("")
		bits := p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		q := netip.PrefixFrom(a, bits).Masked()
		if q.Addr().Is4() {
			v4 = append(v4, q)
		} else {
			v6 = append(v6, q)
		}
	}
	cmp := func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	}
	slices.SortFunc(v4, cmp)
	slices.SortFunc(v6, cmp)
	return slices.Compact(v4), slices.Compact(v6), nil
}
