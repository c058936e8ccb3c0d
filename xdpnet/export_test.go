package xdpnet

import "github.com/xdpkit/xdpkit/umem"

// Accounting returns each queue's UMEM accounting as Close found it.
func (c *UDPConn) Accounting() []umem.Accounting {
	var a []umem.Accounting
	for _, q := range c.queues {
		a = append(a, q.acct)
	}
	return a
}

// Reloads counts the neighbour table's reloads.
func (c *UDPConn) Reloads() uint64 { return c.neigh.reloads.Load() }

// QueueIDs returns the ids of the conn's queues.
func (c *UDPConn) QueueIDs() []int {
	var ids []int
	for _, q := range c.queues {
		ids = append(ids, q.id)
	}
	return ids
}

// RouteGets counts the route lookups (RTM_GETROUTE) of the conn.
func (c *UDPConn) RouteGets() uint64 { return c.neigh.routeGets.Load() }

// WatchErrors counts the failed receives of the rtnetlink subscription.
func (c *UDPConn) WatchErrors() uint64 { return c.neigh.watchErrs.Load() }

// SetWatchBuffer sets the receive buffer of the rtnetlink subscription.
func (c *UDPConn) SetWatchBuffer(n int) error { return c.neigh.watch.SetReadBuffer(n) }

// SetKernelWriteBuffer sets SO_SNDBUF of the conn's kernel socket.
func (c *UDPConn) SetKernelWriteBuffer(n int) error { return c.kernel.SetWriteBuffer(n) }
