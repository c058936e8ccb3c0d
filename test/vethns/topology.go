package vethns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrBadConfig is returned for a PairConfig the test bed cannot build.
var ErrBadConfig = errors.New("vethns: bad pair config")

// Link is one end of a veth pair.
type Link struct {
	NS    *NS
	Name  string // unique per test, at most 15 bytes
	Index int    // ifindex inside NS
	MAC   net.HardwareAddr
	IPv4  netip.Prefix // a /30 inside 198.18.0.0/15
	IPv6  netip.Prefix // a /64 inside 2001:db8::/32
}

// AddrPort4 returns the end's IPv4 address with port.
func (l *Link) AddrPort4(port uint16) netip.AddrPort { return netip.AddrPortFrom(l.IPv4.Addr(), port) }

// AddrPort6 returns the end's IPv6 address with port.
func (l *Link) AddrPort6(port uint16) netip.AddrPort { return netip.AddrPortFrom(l.IPv6.Addr(), port) }

// PairConfig configures NewPair. A nil *PairConfig means all defaults.
type PairConfig struct {
	Queues int // numrxqueues = numtxqueues of both ends (default 1, at most 1024)
	MTU    int // default 1500
	// NoNeigh disables the static neighbour entries (default: each end has a
	// permanent ARP/NDP entry for the other so no ARP/ND traffic is needed).
	NoNeigh bool
}

// Pair is a veth pair whose ends A and B live in namespaces a and b, both up,
// each with a unique /30 IPv4 (198.18.x.y) and /64 IPv6 (2001:db8:...) address,
// IPv6 DAD disabled, static neighbours both ways.
type Pair struct {
	A, B *Link

	nic       int // 1 + the NIC pair's index; 0 for a veth pair
	closeOnce sync.Once
	closeErr  error
}

// NewPair creates a veth pair between a and b (which may be the same
// namespace) and deletes it in tb.Cleanup. It fails tb when the pair cannot
// be built.
func NewPair(tb testing.TB, a, b *NS, cfg *PairConfig) *Pair {
	tb.Helper()
	p, err := CreatePair(a, b, cfg)
	return closedWith(tb, p, err)
}

// closedWith fails tb for err, else closes p in tb.Cleanup.
func closedWith(tb testing.TB, p *Pair, err error) *Pair {
	tb.Helper()
	if err != nil {
		tb.Fatalf("vethns: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("vethns: %v", err)
		}
	})
	return p
}

// CreatePair is NewPair without testing. The pair is deleted with either
// of its namespaces, or earlier by Close.
func CreatePair(a, b *NS, cfg *PairConfig) (_ *Pair, err error) {
	var c PairConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Queues == 0 {
		c.Queues = 1
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.Queues < 0 || c.Queues > 1024 {
		return nil, fmt.Errorf("%w: %d queues (want 1..1024)", ErrBadConfig, c.Queues)
	}
	if c.MTU < 68 || c.MTU > 65535 {
		return nil, fmt.Errorf("%w: MTU %d (want 68..65535)", ErrBadConfig, c.MTU)
	}
	if a == nil || b == nil {
		return nil, fmt.Errorf("%w: nil namespace", ErrBadConfig)
	}

	n := nextSeq()
	nameA, nameB := ifNames(pid, n)
	a4, b4, a6, b6 := pairAddrs(pid, n)
	p := &Pair{
		A: &Link{NS: a, Name: nameA, IPv4: a4, IPv6: a6},
		B: &Link{NS: b, Name: nameB, IPv4: b4, IPv6: b6},
	}

	ha, err := a.netlinkHandle()
	if err != nil {
		return nil, err
	}
	defer ha.Close()
	hb := ha
	if b != a {
		if hb, err = b.netlinkHandle(); err != nil {
			return nil, err
		}
		defer hb.Close()
	}

	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name:        nameA,
			MTU:         c.MTU,
			NumTxQueues: c.Queues,
			NumRxQueues: c.Queues,
			TxQLen:      -1,
		},
		PeerName:        nameB,
		PeerNumTxQueues: uint32(c.Queues),
		PeerNumRxQueues: uint32(c.Queues),
		PeerMTU:         uint32(c.MTU),
		PeerTxQLen:      -1,
	}
	if b != a {
		bh, release, err := b.handle()
		if err != nil {
			return nil, err
		}
		defer release()
		veth.PeerNamespace = netlink.NsFd(int(bh))
	}
	if err := ha.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("create veth %s@%s -- %s@%s: %w", nameA, a.Name, nameB, b.Name, err)
	}
	defer func() {
		if err != nil {
			// Deleting one end deletes both.
			if l, lerr := ha.LinkByName(nameA); lerr == nil {
				ha.LinkDel(l)
			}
		}
	}()

	la, err := ha.LinkByName(nameA)
	if err != nil {
		return nil, fmt.Errorf("find %s in %s: %w", nameA, a.Name, err)
	}
	lb, err := hb.LinkByName(nameB)
	if err != nil {
		return nil, fmt.Errorf("find %s in %s: %w", nameB, b.Name, err)
	}
	for _, l := range []netlink.Link{la, lb} {
		at := l.Attrs()
		if at.NumTxQueues != c.Queues || at.NumRxQueues != c.Queues {
			return nil, fmt.Errorf("veth %s has %d TX and %d RX queues, want %d", at.Name, at.NumTxQueues, at.NumRxQueues, c.Queues)
		}
		if at.MTU != c.MTU {
			return nil, fmt.Errorf("veth %s has MTU %d, want %d", at.Name, at.MTU, c.MTU)
		}
	}
	p.A.Index, p.A.MAC = la.Attrs().Index, la.Attrs().HardwareAddr
	p.B.Index, p.B.MAC = lb.Attrs().Index, lb.Attrs().HardwareAddr

	for _, e := range []struct {
		h    *netlink.Handle
		l    netlink.Link
		self *Link
		peer *Link
	}{{ha, la, p.A, p.B}, {hb, lb, p.B, p.A}} {
		if err := configureEnd(e.h, e.l, e.self, e.peer, !c.NoNeigh); err != nil {
			return nil, err
		}
	}
	if err := waitOperUp(ha, nameA, 30*time.Second); err != nil {
		return nil, err
	}
	if err := waitOperUp(hb, nameB, 30*time.Second); err != nil {
		return nil, err
	}
	// IPv6 installs an address's local route from a work queue after the
	// link comes up; until then the end drops packets to it
	// (Ip6:InAddrErrors). Wait for both.
	if err := waitLocalRoute(ha, p.A.IPv6.Addr(), 10*time.Second); err != nil {
		return nil, err
	}
	if err := waitLocalRoute(hb, p.B.IPv6.Addr(), 10*time.Second); err != nil {
		return nil, err
	}
	return p, nil
}

// waitLocalRoute polls until addr has its route in the local table.
func waitLocalRoute(h *netlink.Handle, addr netip.Addr, timeout time.Duration) error {
	family := unix.AF_INET6
	if addr.Is4() {
		family = unix.AF_INET
	}
	filter := &netlink.Route{
		Table: unix.RT_TABLE_LOCAL,
		Dst:   &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())},
	}
	deadline := time.Now().Add(timeout)
	for {
		routes, err := h.RouteListFiltered(family, filter, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
		if err == nil && len(routes) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no local route for %s after %v (%v)", addr, timeout, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// configureEnd disables DAD, adds the addresses and neighbour entries and
// brings the end up.
func configureEnd(h *netlink.Handle, l netlink.Link, self, peer *Link, neigh bool) error {
	err := self.NS.Do(func() error {
		return writeSysctl("net/ipv6/conf/"+self.Name+"/accept_dad", "0")
	})
	if err != nil {
		return fmt.Errorf("disable DAD on %s: %w", self.Name, err)
	}
	for _, pfx := range []netip.Prefix{self.IPv4, self.IPv6} {
		addr := &netlink.Addr{IPNet: &net.IPNet{
			IP:   pfx.Addr().AsSlice(),
			Mask: net.CIDRMask(pfx.Bits(), pfx.Addr().BitLen()),
		}}
		if pfx.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("add %s to %s: %w", pfx, self.Name, err)
		}
	}
	if neigh {
		for _, ip := range []netip.Addr{peer.IPv4.Addr(), peer.IPv6.Addr()} {
			family := unix.AF_INET
			if ip.Is6() {
				family = unix.AF_INET6
			}
			if err := h.NeighSet(&netlink.Neigh{
				LinkIndex:    self.Index,
				Family:       family,
				State:        netlink.NUD_PERMANENT,
				IP:           ip.AsSlice(),
				HardwareAddr: peer.MAC,
			}); err != nil {
				return fmt.Errorf("add neighbour %s lladdr %s on %s: %w", ip, peer.MAC, self.Name, err)
			}
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", self.Name, err)
	}
	return nil
}

// waitOperUp polls until the link's operational state is up (a veth end is
// up once both ends are).
func waitOperUp(h *netlink.Handle, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("find %s: %w", name, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not up after %v (operstate %v)", name, timeout, l.Attrs().OperState)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Close deletes the pair now rather than with its namespaces (a NIC pair
// of NewNICPair goes back to the process's namespace). It is idempotent,
// and not an error when a namespace is already gone.
func (p *Pair) Close() error {
	p.closeOnce.Do(func() {
		if p.nic > 0 {
			p.closeErr = p.moveHome()
			releaseNICPair(p.nic - 1)
			return
		}
		h, err := p.A.NS.netlinkHandle()
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			p.closeErr = err
			return
		}
		defer h.Close()
		l, err := h.LinkByName(p.A.Name)
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return // already gone with B's namespace
		}
		if err == nil {
			err = h.LinkDel(l)
		}
		if err != nil {
			p.closeErr = fmt.Errorf("delete veth %s: %w", p.A.Name, err)
		}
	})
	return p.closeErr
}
