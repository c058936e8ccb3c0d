package topo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// Topology is the three namespaces and two veth pairs.
type Topology struct {
	Gen, Fwd, Recv *vethns.NS
	In, Out        *vethns.Pair // In: A in Gen, B in Fwd; Out: A in Fwd, B in Recv
}

// Config configures Create. A nil *Config means defaults.
type Config struct {
	MTU int // default 1500
	// Queues is the number of RX and TX queues of every veth (default 1).
	Queues int
	// KeepTxCsum leaves TX checksum offload on at the end hosts.
	KeepTxCsum bool
}

// Create builds the topology. On failure it removes what it built.
func Create(cfg *Config) (_ *Topology, err error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	t := &Topology{}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	for _, p := range []**vethns.NS{&t.Gen, &t.Fwd, &t.Recv} {
		if *p, err = vethns.CreateNS(); err != nil {
			return nil, err
		}
	}
	pc := &vethns.PairConfig{MTU: c.MTU, Queues: c.Queues}
	if t.In, err = vethns.CreatePair(t.Gen, t.Fwd, pc); err != nil {
		return nil, err
	}
	if t.Out, err = vethns.CreatePair(t.Fwd, t.Recv, pc); err != nil {
		return nil, err
	}
	// Routes to the far subnets through the forwarder's ends.
	if err := t.wire(); err != nil {
		return nil, err
	}
	if !c.KeepTxCsum {
		for _, l := range []*vethns.Link{t.In.A, t.Out.B} {
			err := l.NS.Do(func() error { return netdev.SetTxCsumOffload(l.Name, false) })
			if err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// addRoutes adds, in ns, routes to both subnets of far via the gateway's
// addresses.
// Wire makes a Topology of three namespaces and two pairs made elsewhere
// (NIC pairs of vethns.NewNICPair, say; their owner removes them): in
// joins gen (A) to fwd (B), out joins fwd (A) to recv (B). It adds the
// routes and turns on forwarding in fwd, as Create does. Close is not for
// such a Topology.
func Wire(gen, fwd, recv *vethns.NS, in, out *vethns.Pair) (*Topology, error) {
	t := &Topology{Gen: gen, Fwd: fwd, Recv: recv, In: in, Out: out}
	if err := t.wire(); err != nil {
		return nil, err
	}
	return t, nil
}

// wire adds the routes through fwd and turns forwarding on there.
func (t *Topology) wire() error {
	if err := addRoutes(t.Gen, t.Out, t.In.B); err != nil {
		return err
	}
	if err := addRoutes(t.Recv, t.In, t.Out.A); err != nil {
		return err
	}
	return t.Fwd.Do(func() error {
		for _, k := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"} {
			if err := os.WriteFile("/proc/sys/"+k, []byte("1"), 0); err != nil && !(errors.Is(err, os.ErrNotExist) && k != "net/ipv4/ip_forward") {
				return fmt.Errorf("sysctl %s: %w", k, err)
			}
		}
		return nil
	})
}

func addRoutes(ns *vethns.NS, far *vethns.Pair, gw *vethns.Link) error {
	return ns.Do(func() error {
		for _, r := range []struct{ dst, via netip.Prefix }{
			{far.A.IPv4.Masked(), gw.IPv4},
			{far.A.IPv6.Masked(), gw.IPv6},
		} {
			route := &netlink.Route{
				Dst: &net.IPNet{IP: r.dst.Addr().AsSlice(), Mask: net.CIDRMask(r.dst.Bits(), r.dst.Addr().BitLen())},
				Gw:  r.via.Addr().AsSlice(),
			}
			if err := netlink.RouteAdd(route); err != nil {
				return fmt.Errorf("route %s via %s in %s: %w", r.dst, r.via.Addr(), ns.Name, err)
			}
		}
		return nil
	})
}

// Close removes the pairs and the namespaces; it is idempotent.
func (t *Topology) Close() error {
	var errs []error
	for _, p := range []*vethns.Pair{t.Out, t.In} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	for _, ns := range []*vethns.NS{t.Recv, t.Fwd, t.Gen} {
		if ns != nil {
			errs = append(errs, ns.Close())
		}
	}
	return errors.Join(errs...)
}

// LinkStats are a veth end's kernel counters.
type LinkStats struct {
	RxPackets, TxPackets, RxDropped, TxDropped uint64
}

// Stats reads the counters of l in its namespace.
func Stats(l *vethns.Link) (LinkStats, error) {
	var s LinkStats
	err := l.NS.Do(func() error {
		link, err := netlink.LinkByName(l.Name)
		if err != nil {
			return err
		}
		st := link.Attrs().Statistics
		if st == nil {
			return fmt.Errorf("no statistics for %s", l.Name)
		}
		s = LinkStats{st.RxPackets, st.TxPackets, st.RxDropped, st.TxDropped}
		return nil
	})
	return s, err
}

// XDPAttached reports whether l has an XDP program attached.
func XDPAttached(l *vethns.Link) (bool, error) {
	var on bool
	err := l.NS.Do(func() error {
		link, err := netlink.LinkByName(l.Name)
		if err != nil {
			return err
		}
		x := link.Attrs().Xdp
		on = x != nil && (x.Attached || x.ProgId != 0)
		return nil
	})
	return on, err
}
