package xdpnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	mdnl "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// maxRoutes bounds the route cache; it is emptied when full.
const maxRoutes = 1 << 16

// hop is where a datagram to one destination goes: the next hop's
// address on the conn's interface, or the kernel (kernel true) when the
// route leaves by another interface or is local.
type hop struct {
	next   netip.Addr
	kernel bool
	gen    uint64
}

// neighbours maps destinations to next-hop MAC addresses from the
// kernel's routes and neighbour table, read through rtnetlink in the
// conn's network namespace, and refreshed when the kernel announces a
// change of a neighbour, a route or the interface (RTMGRP_NEIGH,
// RTMGRP_*_ROUTE, RTMGRP_LINK).
type neighbours struct {
	h       *netlink.Handle // opened in the conn's namespace
	ifindex int
	family  int

	mu     sync.RWMutex
	gen    uint64                 // bumped by every change of a route or a link
	macs   map[netip.Addr][6]byte // usable neighbour entries of the interface
	routes map[netip.Addr]hop     // destination -> next hop, valid while gen matches
	srcMAC [6]byte

	watch     *mdnl.Conn
	stop      chan struct{} // closed by close
	done      chan struct{}
	reloads   atomic.Uint64
	routeGets atomic.Uint64 // RTM_GETROUTE requests
	watchErrs atomic.Uint64 // failed receives of the subscription
	lastErr   atomic.Pointer[error]
}

// newNeighbours reads the interface's neighbours and subscribes to
// changes. It must run on a thread in the conn's network namespace.
func newNeighbours(ifindex int, v4 bool) (*neighbours, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("xdpnet: rtnetlink: %w", err)
	}
	n := &neighbours{h: h, ifindex: ifindex, family: netlink.FAMILY_V6, stop: make(chan struct{}), done: make(chan struct{})}
	if v4 {
		n.family = netlink.FAMILY_V4
	}
	n.watch, err = mdnl.Dial(unix.NETLINK_ROUTE, &mdnl.Config{
		Groups: unix.RTMGRP_NEIGH | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE | unix.RTMGRP_LINK,
	})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("xdpnet: rtnetlink subscription: %w", err)
	}
	if err := n.reload(true); err != nil {
		n.watch.Close()
		h.Close()
		return nil, err
	}
	go n.run()
	return n, nil
}

// run reloads the table after every batch of announcements until close.
// A batch of neighbour announcements reloads the neighbour entries only;
// one with a route or link announcement also empties the route cache. A
// failed receive (ENOBUFS: the kernel dropped announcements while the
// socket's buffer was full) is recorded and reloads everything, since
// any announcement may have been lost; the watcher goes on until close.
func (n *neighbours) run() {
	defer close(n.done)
	backoff := time.Duration(0)
	for {
		msgs, err := n.watch.Receive()
		select {
		case <-n.stop:
			return
		default:
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			n.watchErrs.Add(1)
			err = fmt.Errorf("xdpnet: rtnetlink subscription: %w", err)
			n.lastErr.Store(&err)
			// Back off while the failures go on, so that a persistent
			// one does not spin.
			if backoff > 0 {
				select {
				case <-n.stop:
					return
				case <-time.After(backoff):
				}
			}
			backoff = min(2*backoff+time.Millisecond, time.Second)
			if err := n.reload(true); err != nil {
				n.lastErr.Store(&err)
			}
			continue
		}
		backoff = 0
		routes := false
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.RTM_NEWNEIGH, unix.RTM_DELNEIGH:
			default:
				routes = true
			}
		}
		if err := n.reload(routes); err != nil {
			n.lastErr.Store(&err)
		}
	}
}

// reload reads the interface's MAC and its neighbour entries again and,
// with routes, invalidates the cached routes.
func (n *neighbours) reload(routes bool) error {
	link, err := n.h.LinkByIndex(n.ifindex)
	if err != nil {
		return fmt.Errorf("xdpnet: interface %d: %w", n.ifindex, err)
	}
	list, err := n.h.NeighList(n.ifindex, n.family)
	if err != nil {
		return fmt.Errorf("xdpnet: neighbour table: %w", err)
	}
	macs := make(map[netip.Addr][6]byte, len(list))
	for _, e := range list {
		const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY |
			netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP
		a, ok := netip.AddrFromSlice(e.IP)
		if !ok || e.State&usable == 0 || len(e.HardwareAddr) != 6 {
			continue
		}
		macs[a.Unmap()] = [6]byte(e.HardwareAddr)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.macs = macs
	if len(link.Attrs().HardwareAddr) == 6 {
		n.srcMAC = [6]byte(link.Attrs().HardwareAddr)
	}
	if routes {
		n.gen++
	}
	n.reloads.Add(1)
	return nil
}

// lookup returns the source and next-hop MAC addresses for dst; ok is
// false when the datagram must go through the kernel: the route leaves
// by another interface, or the neighbour is not resolved yet.
func (n *neighbours) lookup(dst netip.Addr) (src, mac [6]byte, ok bool) {
	n.mu.RLock()
	r, have := n.routes[dst]
	if have && r.gen == n.gen {
		mac, ok = n.macs[r.next]
		src = n.srcMAC
		n.mu.RUnlock()
		return src, mac, ok && !r.kernel
	}
	n.mu.RUnlock()
	r = n.route(dst)
	n.mu.Lock()
	defer n.mu.Unlock()
	if r.gen == n.gen {
		if len(n.routes) >= maxRoutes || n.routes == nil {
			n.routes = make(map[netip.Addr]hop)
		}
		n.routes[dst] = r
	}
	mac, ok = n.macs[r.next]
	return n.srcMAC, mac, ok && !r.kernel
}

// route asks the kernel for dst's route (RTM_GETROUTE).
func (n *neighbours) route(dst netip.Addr) hop {
	n.mu.RLock()
	gen := n.gen
	n.mu.RUnlock()
	n.routeGets.Add(1)
	var opts netlink.RouteGetOptions
	if dst.IsLinkLocalUnicast() {
		opts.OifIndex = n.ifindex // fe80::/64 is on every interface
	}
	rs, err := n.h.RouteGetWithOptions(net.IP(dst.AsSlice()), &opts)
	if err != nil || len(rs) == 0 {
		return hop{kernel: true, gen: gen}
	}
	r := rs[0]
	if r.LinkIndex != n.ifindex || r.Type == unix.RTN_LOCAL {
		return hop{kernel: true, gen: gen}
	}
	next := dst
	if g, ok := netip.AddrFromSlice(r.Gw); ok && r.Gw != nil {
		next = g.Unmap()
	}
	return hop{next: next, gen: gen}
}

func (n *neighbours) close() error {
	close(n.stop)
	err := n.watch.Close()
	<-n.done
	n.h.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
