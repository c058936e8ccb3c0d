package xdpprog

import (
	"fmt"
	"net/netip"
	"slices"
)

// portBitmapSize is the size of the port map's single value: one bit per
// UDP/TCP port.
const portBitmapSize = 65536 / 8

// filter is a validated, normalised Filter as the assembler consumes it.
type filter struct {
	udp4, tcp4, udp6, tcp6 bool
	ports                  []uint16   // sorted, unique; empty: any port
	pass4                  [][4]byte  // sorted, unique
	pass6                  [][16]byte // sorted, unique
	only                   *onlyDst   // nil without OnlyDst (onlydst.go)
}

func (f *filter) v4() bool { return (f.udp4 || f.tcp4) && f.only.has4() }
func (f *filter) v6() bool { return (f.udp6 || f.tcp6) && f.only.has6() }

// newFilter validates f and normalises it; nil stays nil.
func newFilter(f *Filter) (*filter, error) {
	if f == nil {
		return nil, nil
	}
	n := &filter{udp4: f.IPv4UDP, tcp4: f.IPv4TCP, udp6: f.IPv6UDP, tcp6: f.IPv6TCP}
	if !n.udp4 && !n.tcp4 && !n.udp6 && !n.tcp6 {
		n.udp4, n.tcp4, n.udp6, n.tcp6 = true, true, true, true
	}
	n.ports = slices.Clone(f.DstPorts)
	slices.Sort(n.ports)
	n.ports = slices.Compact(n.ports)

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
	var err error
	if n.only, err = newOnlyDst(f.OnlyDst); err != nil {
		return nil, err
	}
	return n, nil
}
