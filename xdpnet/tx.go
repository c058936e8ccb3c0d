package xdpnet

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/txpath"
)

func (c *UDPConn) writeErr(dst netip.AddrPort, err error) error {
	return &net.OpError{Op: "write", Net: "udp", Source: c.LocalAddr(), Addr: net.UDPAddrFromAddrPort(dst), Err: err}
}

// WriteToUDPAddrPort sends b as one datagram to dst. The datagram is
// queued on the TX ring of one of the conn's sockets (chosen by dst, so
// that datagrams to one destination stay in order) and handed to the
// kernel with the ring's next batch, at the latest once the goroutines
// that are ready to run have run. A datagram longer than one frame or
// the MTU allows, or to a destination whose next hop is not in the
// kernel's neighbour table or lies behind another interface, goes out
// through the kernel socket instead (the kernel fragments it, resolves
// the neighbour or routes it). It blocks only while the TX ring is full,
// until the write deadline. It allocates nothing on the AF_XDP path;
// WriteTo does the same with a *net.UDPAddr.
func (c *UDPConn) WriteToUDPAddrPort(b []byte, dst netip.AddrPort) (int, error) {
	if c.closing.Load() {
		return 0, c.writeErr(dst, net.ErrClosed)
	}
	expired := c.wdl.wait()
	select {
	case <-expired:
		return 0, c.writeErr(dst, os.ErrDeadlineExceeded)
	default:
	}
	// The AF_XDP path compares addresses without their zone; the kernel
	// socket needs the interface as a link-local address's zone.
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if !dst.IsValid() || dst.Addr().Is4() != c.laddr.Addr().Is4() {
		return 0, c.writeErr(dst, unix.EAFNOSUPPORT)
	}
	if len(b) > c.maxPayload {
		return c.writeKernel(b, netip.AddrPortFrom(withZone(dst.Addr(), c.ifname), dst.Port()))
	}
	src, mac, ok := c.neigh.lookup(dst.Addr().WithZone(""))
	if !ok {
		return c.writeKernel(b, netip.AddrPortFrom(withZone(dst.Addr(), c.ifname), dst.Port()))
	}
	dst = netip.AddrPortFrom(dst.Addr().WithZone(""), dst.Port())
	q := c.queues[0]
	if len(c.queues) > 1 {
		q = c.queues[hashAddrPort(dst)%uint32(len(c.queues))]
	}
	var wait *time.Timer
	flushed := false
	q.mu.Lock()
	for {
		if q.closed {
			q.mu.Unlock()
			return 0, c.writeErr(dst, net.ErrClosed)
		}
		f, err := q.s.Next()
		if err == nil {
			n := putHeaders(f.Buf, mac, src, c.laddr, dst, len(b))
			copy(f.Buf[n:], b)
			if err = q.s.Commit(f, n+len(b), txpath.Options{Checksum: true}); err != nil {
				q.mu.Unlock()
				return 0, c.writeErr(dst, err)
			}
			break
		}
		if !errors.Is(err, txpath.ErrNoFrames) && !errors.Is(err, txpath.ErrRingFull) {
			q.mu.Unlock()
			return 0, c.writeErr(dst, err)
		}
		// Full: submit what is queued, reap completions, and wait a
		// little for the kernel before trying again.
		q.pending = false
		if err := q.s.Flush(); err != nil {
			c.txc.flushErrors.Add(1)
		}
		if !flushed {
			flushed = true // the flush may have reaped frames: try again at once
			continue
		}
		flushed = false
		q.mu.Unlock()
		if wait == nil {
			wait = time.NewTimer(50 * time.Microsecond)
		} else {
			wait.Reset(50 * time.Microsecond)
		}
		select {
		case <-wait.C:
		case <-expired:
			wait.Stop()
			return 0, c.writeErr(dst, os.ErrDeadlineExceeded)
		case <-c.done:
			wait.Stop()
			return 0, c.writeErr(dst, net.ErrClosed)
		}
		q.mu.Lock()
	}
	c.txc.sent.Add(1)
	if q.s.Queued() >= txpath.DefaultBatchSize {
		q.pending = false
		err := q.s.Flush()
		q.mu.Unlock()
		if err != nil {
			c.txc.flushErrors.Add(1)
		}
		return len(b), nil
	}
	kick := !q.pending
	q.pending = true
	q.mu.Unlock()
	if kick {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return len(b), nil
}

// writeKernel sends through the kernel socket, whose write deadline
// SetWriteDeadline keeps equal to the conn's.
func (c *UDPConn) writeKernel(b []byte, dst netip.AddrPort) (int, error) {
	n, err := c.kernel.WriteToUDPAddrPort(b, dst)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			op.Source = c.LocalAddr()
			return n, op
		}
		return n, c.writeErr(dst, err)
	}
	c.txc.kernelSent.Add(1)
	return n, nil
}

// flusher submits what writers queued: woken by the first write after a
// flush, it lets the goroutines that are ready to run write first, so
// that one kick sends what they wrote.
func (c *UDPConn) flusher() {
	defer c.wg.Done()
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		runtime.Gosched()
		for _, q := range c.queues {
			q.mu.Lock()
			if q.pending && !q.closed {
				q.pending = false
				if err := q.s.Flush(); err != nil {
					c.txc.flushErrors.Add(1)
				}
			}
			q.mu.Unlock()
		}
	}
}

// hashAddrPort spreads destinations over the queues.
func hashAddrPort(a netip.AddrPort) uint32 {
	b := a.Addr().As16()
	h := uint32(2166136261)
	for _, x := range b[8:] {
		h = (h ^ uint32(x)) * 16777619
	}
	h = (h ^ uint32(a.Port())) * 16777619
	return h
}

// Message is one datagram of a batch, as in golang.org/x/net/ipv4's
// ReadBatch and WriteBatch.
type Message struct {
	// Buf holds the payload: room for it in ReadBatch, the datagram in
	// WriteBatch.
	Buf []byte
	// Addr is the source (ReadBatch) or the destination (WriteBatch).
	Addr netip.AddrPort
	// N is the number of bytes read into Buf (ReadBatch) or written
	// (WriteBatch).
	N int
}

// ReadBatch reads up to len(ms) datagrams: it blocks as ReadFrom does
// until at least one is there, then takes those that are ready without
// waiting more. It returns how many messages it filled.
func (c *UDPConn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	n, src, err := c.ReadFromUDPAddrPort(ms[0].Buf)
	if err != nil {
		return 0, err
	}
	ms[0].N, ms[0].Addr = n, src
	i := 1
	for ; i < len(ms); i++ {
		n, src, ok := c.rx.pop(ms[i].Buf)
		if !ok {
			break
		}
		ms[i].N, ms[i].Addr = n, src
	}
	return i, nil
}

// WriteBatch sends the messages in order and returns how many it sent;
// on error, the error is that of message n.
func (c *UDPConn) WriteBatch(ms []Message) (int, error) {
	for i := range ms {
		n, err := c.WriteToUDPAddrPort(ms[i].Buf, ms[i].Addr)
		ms[i].N = n
		if err != nil {
			return i, err
		}
	}
	return len(ms), nil
}

// Stats are a conn's counters since ListenUDP.
type Stats struct {
	// Received: datagrams made readable, from the AF_XDP sockets and
	// (KernelReceived of them) from the kernel socket.
	Received, KernelReceived uint64
	// Dropped: datagrams dropped because ReadBuffer datagrams were
	// waiting to be read.
	Dropped uint64
	// MultiBuffer: frames of more than one buffer (with
	// Config.Socket.MultiBuffer), which the conn does not take.
	MultiBuffer uint64
	// Malformed, NotOurs, BadChecksum: frames the AF_XDP sockets got
	// that were not datagrams to read: headers cut short or
	// inconsistent; not a whole UDP datagram to the bound address and
	// port; a wrong IPv4 header or UDP checksum.
	Malformed, NotOurs, BadChecksum uint64
	// Sent: datagrams queued on a TX ring; KernelSent: sent through the
	// kernel socket (too long, or no neighbour entry yet).
	Sent, KernelSent uint64
	// FlushErrors: failed kicks of a TX ring.
	FlushErrors uint64
	// KernelReadErrors: failed reads of the kernel socket.
	KernelReadErrors uint64
}

// Stats returns the conn's counters.
func (c *UDPConn) Stats() Stats {
	var s Stats
	for i := range c.rxc {
		r := &c.rxc[i]
		s.Received += r.received.Load()
		s.Dropped += r.dropped.Load()
		s.Malformed += r.malformed.Load()
		s.NotOurs += r.notOurs.Load()
		s.BadChecksum += r.badSum.Load()
		s.MultiBuffer += r.uncopied.Load()
	}
	s.KernelReceived = c.rxc[len(c.rxc)-1].received.Load()
	s.KernelReadErrors = c.rxc[len(c.rxc)-1].readErrors.Load()
	s.Sent, s.KernelSent, s.FlushErrors = c.txc.sent.Load(), c.txc.kernelSent.Load(), c.txc.flushErrors.Load()
	return s
}
