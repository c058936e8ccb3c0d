package nexthop

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Errors of Lookup.
var (
	ErrNoRoute     = errors.New("nexthop: no route")
	ErrNoNeighbour = errors.New("nexthop: no resolved neighbour")
)

// Hop is where to send a packet.
type Hop struct {
	LinkIndex int
	Gateway   netip.Addr // the next hop's address (dst itself when on-link)
	MAC       [6]byte
	Src       netip.Addr // the route's preferred source address, if any
}

// Resolve asks the kernel, in the calling thread's network namespace, for
// the route to dst and the neighbour entry of its next hop. A neighbour
// that is not resolved yet (incomplete, failed) gives ErrNoNeighbour.
func Resolve(dst netip.Addr) (Hop, error) {
	dst = dst.Unmap()
	routes, err := netlink.RouteGet(dst.AsSlice())
	if err != nil || len(routes) == 0 {
		return Hop{}, fmt.Errorf("%w to %s: %v", ErrNoRoute, dst, err)
	}
	r := routes[0]
	if r.Type == unix.RTN_LOCAL || r.Type == unix.RTN_BLACKHOLE || r.Type == unix.RTN_UNREACHABLE || r.Type == unix.RTN_PROHIBIT {
		return Hop{}, fmt.Errorf("%w to %s (route type %d)", ErrNoRoute, dst, r.Type)
	}
	h := Hop{LinkIndex: r.LinkIndex, Gateway: dst}
	if src, ok := netip.AddrFromSlice(r.Src); ok {
		h.Src = src.Unmap()
	}
	if gw, ok := netip.AddrFromSlice(r.Gw); ok && gw.IsValid() && !gw.IsUnspecified() {
		h.Gateway = gw.Unmap()
	}
	family := netlink.FAMILY_V4
	if h.Gateway.Is6() {
		family = netlink.FAMILY_V6
	}
	neighs, err := netlink.NeighList(r.LinkIndex, family)
	if err != nil {
		return Hop{}, fmt.Errorf("nexthop: neighbours of link %d: %w", r.LinkIndex, err)
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.Unmap() != h.Gateway || len(n.HardwareAddr) != 6 {
			continue
		}
		if n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) != 0 || n.State == netlink.NUD_NONE {
			continue
		}
		copy(h.MAC[:], n.HardwareAddr)
		return h, nil
	}
	// Nothing resolved: the kernel never sees the traffic we forward, so
	// it will not resolve the next hop by itself (after a link went down,
	// even permanent entries are gone). Ask it to, as a packet would
	// (NTF_USE: neigh_event_send); the answer arrives through the XDP
	// filter's pass path, and the next Resolve finds it.
	_ = netlink.NeighSet(&netlink.Neigh{LinkIndex: r.LinkIndex, Family: family, IP: h.Gateway.AsSlice(), Flags: netlink.NTF_USE})
	return Hop{}, fmt.Errorf("%w for %s on link %d", ErrNoNeighbour, h.Gateway, r.LinkIndex)
}

// MAC formats a MAC address.
func MAC(m [6]byte) string { return net.HardwareAddr(m[:]).String() }

// Cache remembers Resolve's answers: successes for TTL, failures for
// NegativeTTL (so that a packet storm to an unreachable destination does
// not become a netlink storm). It is not safe for concurrent use.
type Cache struct {
	TTL, NegativeTTL time.Duration
	Max              int // entries; the cache is emptied when full
	Resolve          func(netip.Addr) (Hop, error)

	m       map[netip.Addr]entry
	Lookups uint64 // Resolve calls made
}

type entry struct {
	hop     Hop
	err     error
	expires int64 // unix nanoseconds
}

// NewCache returns a cache over Resolve with TTL 2 s, failures kept 100 ms.
func NewCache() *Cache {
	return &Cache{TTL: 2 * time.Second, NegativeTTL: 100 * time.Millisecond, Max: 4096,
		Resolve: Resolve, m: make(map[netip.Addr]entry)}
}

// Get returns the hop for dst as of now (unix nanoseconds).
func (c *Cache) Get(dst netip.Addr, now int64) (Hop, error) {
	if e, ok := c.m[dst]; ok && now < e.expires {
		return e.hop, e.err
	}
	c.Lookups++
	hop, err := c.Resolve(dst)
	ttl := c.TTL
	if err != nil {
		ttl = c.NegativeTTL
	}
	if len(c.m) >= c.Max {
		clear(c.m)
	}
	c.m[dst] = entry{hop: hop, err: err, expires: now + int64(ttl)}
	return hop, err
}
