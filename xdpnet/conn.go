package xdpnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Errors of ListenUDP and Close, matched with errors.Is.
var (
	// ErrAddr: the address is not one of the interface's, is unspecified,
	// or has no port family the conn can serve.
	ErrAddr = errors.New("xdpnet: address not usable")
	// ErrConfig: an invalid Config.
	ErrConfig = errors.New("xdpnet: invalid config")
	// ErrMTU: the interface's MTU is larger than a UMEM frame holds.
	ErrMTU = errors.New("xdpnet: interface MTU too large")
	// ErrFramesLost: Close found UMEM frames that did not come back.
	ErrFramesLost = errors.New("xdpnet: UMEM frames lost")
)

// Config configures ListenUDP. A nil *Config means all defaults.
type Config struct {
	// Queues are the interface's receive queues to serve, one AF_XDP
	// socket each; each must be one of the queues in use (ethtool -l) as
	// an RX and a TX queue. Default: every such queue.
	Queues []int
	// FrameCount is the number of UMEM frames per queue (default 4096):
	// half for receiving, half for sending.
	FrameCount int
	// ReadBuffer is how many received datagrams wait for ReadFrom before
	// more are dropped, like a socket's receive buffer (default 4096).
	ReadBuffer int
	// Socket configures every AF_XDP socket (ring sizes, copy or
	// zero-copy, busy polling).
	Socket xsk.Config
	// Poller configures every queue's poller; CopyThreshold is set by
	// ListenUDP (every datagram is copied out of the UMEM).
	Poller rxpath.Config
	// Policy is the senders' copy and checksum policy (txpath.Auto by
	// default, which gives complete checksums on every device).
	// txpath.Plain, which fills no checksum, is refused with ErrConfig.
	Policy txpath.Policy
}

// queue is one receive queue: its UMEM, socket, poller and sender.
type queue struct {
	id     int
	u      *umem.UMEM
	sock   *xsk.Socket
	poller *rxpath.Poller
	h      *handler
	acct   umem.Accounting // at Close, before the UMEM is released

	mu      sync.Mutex // the sender's: one writer at a time
	s       *txpath.Sender
	pending bool // queued descriptors wait for the flusher
	closed  bool
}

// UDPConn is a UDP socket over AF_XDP sockets: a net.PacketConn bound to
// one address and port of one interface. Its methods may be called from
// any number of goroutines at once.
type UDPConn struct {
	laddr      netip.AddrPort // without a zone, as datagrams carry it
	zladdr     netip.AddrPort // with the interface as the zone of a link-local address
	ifname     string
	maxPayload int
	queues     []*queue
	prog       *xsk.Program
	kernel     *net.UDPConn
	neigh      *neighbours

	rx      rxQueue
	rxc     []counters // one per queue, then the kernel socket's
	txc     struct{ sent, kernelSent, flushErrors atomic.Uint64 }
	rdl     deadline
	wdl     deadline
	wdlMu   sync.Mutex // orders wdl's and the kernel socket's settings
	closing atomic.Bool
	done    chan struct{}
	broken  chan struct{} // closed when a poller failed
	rxErr   atomic.Pointer[error]
	kick    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var _ net.PacketConn = (*UDPConn)(nil)

// ListenUDP opens a UDP socket on the interface named ifname, bound to
// addr, which must be one of the interface's addresses (a zero port picks
// a free one). It attaches the XDP program to the interface, which
// redirects the UDP datagrams to addr's port into one AF_XDP socket per
// receive queue and leaves everything else to the kernel, and binds a
// kernel UDP socket to the same address and port (see the package
// documentation). Call it on a thread in the interface's network
// namespace; the conn's sockets stay there. ctx bounds the setup only.
//
// One UDPConn per interface: the interface has one XDP program.
func ListenUDP(ctx context.Context, ifname string, addr netip.AddrPort, cfg *Config) (*UDPConn, error) {
	return listenUDP(ctx, ifname, addr, cfg)
}

func listenUDP(ctx context.Context, ifname string, addr netip.AddrPort, cfg *Config) (_ *UDPConn, err error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.FrameCount == 0 {
		c.FrameCount = 4096
	}
	if c.ReadBuffer == 0 {
		c.ReadBuffer = 4096
	}
	if c.FrameCount < 64 || c.ReadBuffer < 1 {
		return nil, fmt.Errorf("%w: FrameCount %d (at least 64), ReadBuffer %d", ErrConfig, c.FrameCount, c.ReadBuffer)
	}
	if c.Policy == txpath.Plain {
		// Plain fills no UDP checksum: every write would fail.
		return nil, fmt.Errorf("%w: policy %v fills no checksum", ErrConfig, c.Policy)
	}
	// Addresses compare without their zone; a link-local address gets
	// the interface's as its zone where the kernel needs one.
	a := addr.Addr().Unmap().WithZone("")
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
		return nil, fmt.Errorf("%w: %v", ErrAddr, addr)
	}
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("xdpnet: interface %q: %w", ifname, err)
	}
	family := netlink.FAMILY_V6
	if a.Is4() {
		family = netlink.FAMILY_V4
	}
	addrs, err := netlink.AddrList(link, family)
	if err != nil {
		return nil, fmt.Errorf("xdpnet: addresses of %q: %w", ifname, err)
	}
	found := false
	for _, x := range addrs {
		if ip, ok := netip.AddrFromSlice(x.IP); ok && ip.Unmap() == a {
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %v is not an address of %q", ErrAddr, a, ifname)
	}
	mtu := link.Attrs().MTU
	frameSize := uint32(2048)
	if mtu+ethLen+4 > 2048-256 { // the kernel keeps XDP_PACKET_HEADROOM in front
		frameSize = 4096
	}
	if mtu+ethLen+4 > int(frameSize)-256 {
		return nil, fmt.Errorf("%w: MTU %d of %q", ErrMTU, mtu, ifname)
	}
	// The kernel binds an AF_XDP socket only to a queue in use (ethtool
	// channels), which may be fewer than the queues allocated; a socket
	// with RX and TX rings, as the conn's are, to a queue that is both an
	// RX and a TX queue in use.
	info, err := xsk.Device(ifname)
	if err != nil {
		return nil, fmt.Errorf("xdpnet: interface %q: %w", ifname, err)
	}
	inUse := max(info.RxQueues, info.TxQueues)
	if info.RxQueues > 0 && info.TxQueues > 0 {
		inUse = min(info.RxQueues, info.TxQueues)
	}
	inUse = max(1, inUse)
	queues := c.Queues
	if len(queues) == 0 {
		for i := range inUse {
			queues = append(queues, i)
		}
	}
	maxQueue := 0
	seen := make(map[int]bool, len(queues))
	for _, q := range queues {
		if q < 0 || q >= inUse || seen[q] {
			return nil, fmt.Errorf("%w: queue %d (%q has queues 0 to %d in use, each may be given once)", ErrConfig, q, ifname, inUse-1)
		}
		seen[q] = true
		maxQueue = max(maxQueue, q)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	network := "udp6"
	if a.Is4() {
		network = "udp4"
	}
	kernel, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(withZone(a, ifname), addr.Port())))
	if err != nil {
		return nil, fmt.Errorf("xdpnet: kernel socket: %w", err)
	}
	laddr := netip.AddrPortFrom(a, kernel.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	conn := &UDPConn{
		laddr: laddr, zladdr: netip.AddrPortFrom(withZone(a, ifname), laddr.Port()), ifname: ifname, kernel: kernel,
		done: make(chan struct{}), broken: make(chan struct{}), kick: make(chan struct{}, 1),
		rxc: make([]counters, len(queues)+1),
	}
	defer func() {
		if err != nil {
			conn.teardown()
		}
	}()
	conn.rdl.init()
	conn.wdl.init()
	conn.rx.init(c.ReadBuffer, int(frameSize))
	if conn.neigh, err = newNeighbours(link.Attrs().Index, a.Is4()); err != nil {
		return nil, err
	}
	dev, err := txpath.ProbeDevice(ifname, false)
	if err != nil {
		return nil, err
	}
	// Only datagrams to the bound address and port: transit traffic,
	// broadcast, multicast and the interface's other addresses (also those
	// added later) stay with the kernel.
	// Only datagrams to the bound address and port: with a prefix of one
	// IP version only, the program leaves the other version to the kernel.
	filter := &xsk.Filter{IPv4UDP: a.Is4(), IPv6UDP: !a.Is4(), DstPorts: []uint16{laddr.Port()},
		DstPrefixes: []netip.Prefix{netip.PrefixFrom(a.WithZone(""), a.BitLen())}}
	if conn.prog, err = xsk.AttachProgram(ifname, &xsk.ProgramConfig{Filter: filter, MaxQueues: maxQueue + 1}); err != nil {
		return nil, err
	}
	pc := c.Poller
	pc.CopyThreshold = int(frameSize)
	for i, id := range queues {
		q := &queue{id: id}
		conn.queues = append(conn.queues, q)
		if q.u, err = umem.New(&umem.Config{FrameSize: frameSize, FrameCount: uint32(c.FrameCount)}); err != nil {
			return nil, err
		}
		if q.sock, err = xsk.New(ifname, id, q.u, &c.Socket); err != nil {
			return nil, err
		}
		if q.s, err = txpath.New(q.sock, &txpath.Config{Policy: c.Policy}); err != nil {
			return nil, err
		}
		if q.poller, err = rxpath.New(&pc, q.sock); err != nil {
			return nil, err
		}
		trust := dev.Software
		if q.sock.ZeroCopy() {
			trust = false
		}
		q.h = newHandler(&conn.rx, laddr, ifname, trust, &conn.rxc[i])
		if conn.maxPayload == 0 || q.s.FrameCap() < conn.maxPayload {
			conn.maxPayload = q.s.FrameCap()
		}
	}
	ipLen := ipv6Len
	if a.Is4() {
		ipLen = ipv4Len
	}
	conn.maxPayload = min(conn.maxPayload-ethLen, mtu) - ipLen - udpLen
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rctx, cancel := context.WithCancel(context.Background())
	conn.cancel = cancel
	for _, q := range conn.queues {
		conn.wg.Add(1)
		go conn.poll(rctx, q)
	}
	conn.wg.Add(2)
	go conn.flusher()
	go conn.kernelReader(&conn.rxc[len(queues)])
	// A queue goes to its socket once its poller has put frames on the
	// Fill ring; until then its datagrams reach the kernel socket.
	for _, q := range conn.queues {
		if err = conn.started(ctx, q); err != nil {
			return nil, err
		}
		if err = conn.prog.Register(q.sock); err != nil {
			return nil, err
		}
	}
	return conn, nil
}

// started waits until q's poller has run a round (and so filled its
// Fill ring), or ctx ends, or the poller failed.
func (c *UDPConn) started(ctx context.Context, q *queue) error {
	for {
		st, err := q.poller.Stats()
		if err != nil {
			return err
		}
		if st.Rounds > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.broken:
			return *c.rxErr.Load()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

func (c *UDPConn) poll(ctx context.Context, q *queue) {
	defer c.wg.Done()
	err := q.poller.Run(ctx, q.h)
	q.h.release()
	if err != nil && ctx.Err() == nil {
		if c.rxErr.CompareAndSwap(nil, &err) {
			close(c.broken)
		}
	}
}

// kernelReader passes on what the kernel socket receives: the datagrams
// the XDP program leaves to the kernel (fragments, IPv6 extension
// headers), reassembled. After a failed read it waits (retryDelay) before
// the next, so that an error that persists does not spin; it stops when
// the socket is closed.
func (c *UDPConn) kernelReader(cnt *counters) {
	defer c.wg.Done()
	buf := make([]byte, 1<<16)
	var wait *time.Timer
	fails := 0
	for {
		n, src, err := c.kernel.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			cnt.readErrors.Add(1)
			if wait == nil {
				wait = time.NewTimer(retryDelay(fails))
			} else {
				wait.Reset(retryDelay(fails))
			}
			fails++
			select {
			case <-wait.C:
			case <-c.done:
				wait.Stop()
				return
			}
			continue
		}
		fails = 0
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		if c.rx.pushCopy(buf[:n], src) {
			cnt.received.Add(1)
		} else {
			cnt.dropped.Add(1)
		}
	}
}

// retryDelay is how long a reader waits after its n-th failed read in a
// row (from 0): 1 ms, doubling up to 1 s.
func retryDelay(n int) time.Duration {
	return min(time.Millisecond<<min(n, 10), time.Second)
}

// Close closes the conn: blocked reads and writes return net.ErrClosed,
// datagrams queued for sending are flushed, and the XDP program, the
// sockets and the UMEMs are released. It reports ErrFramesLost when a
// UMEM did not get all its frames back. Close is idempotent.
func (c *UDPConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.teardown() })
	if c.closeErr != nil {
		return c.opErr("close", c.closeErr)
	}
	return nil
}

func (c *UDPConn) teardown() error {
	c.closing.Store(true)
	close(c.done)
	if c.cancel != nil {
		c.cancel()
	}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	keep(c.kernel.Close())
	c.wg.Wait()
	for _, q := range c.queues {
		q.mu.Lock()
		q.closed = true
		if q.s != nil {
			keep(q.s.Flush())
		}
		q.mu.Unlock()
	}
	for _, q := range c.queues {
		if q.s != nil {
			keep(q.s.Close())
		}
		if q.poller != nil {
			keep(q.poller.Close())
		}
	}
	if c.prog != nil {
		keep(c.prog.Close())
	}
	for _, q := range c.queues {
		if q.sock != nil {
			keep(q.sock.Close())
		}
	}
	for _, q := range c.queues {
		if q.u == nil {
			continue
		}
		q.acct = q.u.Accounting()
		if q.acct.Free != q.acct.Total {
			keep(fmt.Errorf("%w: queue %d: %v", ErrFramesLost, q.id, q.acct))
		}
		keep(q.u.Close())
	}
	if c.neigh != nil {
		keep(c.neigh.close())
	}
	if c.rdl.timer != nil {
		c.rdl.stop()
		c.wdl.stop()
	}
	return errors.Join(errs...)
}

// LocalAddr returns the bound address, a *net.UDPAddr; a link-local
// address has the interface's name as its zone.
func (c *UDPConn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.zladdr) }

// AddrPort returns the bound address and port, as LocalAddr does.
func (c *UDPConn) AddrPort() netip.AddrPort { return c.zladdr }

// withZone gives a link-local IPv6 address without a zone the zone
// ifname, as the kernel needs to send to it or bind to it.
func withZone(a netip.Addr, ifname string) netip.Addr {
	if a.Is6() && a.Zone() == "" && (a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast()) {
		return a.WithZone(ifname)
	}
	return a
}

// SetDeadline sets the read and write deadlines, as net.Conn's does.
func (c *UDPConn) SetDeadline(t time.Time) error {
	if c.closing.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rdl.set(t)
	return c.setWriteDeadline(t)
}

// SetReadDeadline sets the deadline for reads: a read blocked now or
// later fails with an error wrapping os.ErrDeadlineExceeded once t has
// passed. The zero time means none.
func (c *UDPConn) SetReadDeadline(t time.Time) error {
	if c.closing.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the deadline for writes, which block only while
// the TX ring or the kernel socket's send buffer is full.
func (c *UDPConn) SetWriteDeadline(t time.Time) error {
	if c.closing.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	return c.setWriteDeadline(t)
}

// setWriteDeadline sets the write deadline of the AF_XDP path and of the
// kernel socket, so that a write blocked in either sees the change.
func (c *UDPConn) setWriteDeadline(t time.Time) error {
	c.wdlMu.Lock()
	defer c.wdlMu.Unlock()
	c.wdl.set(t)
	if err := c.kernel.SetWriteDeadline(t); err != nil {
		return c.opErr("set", err)
	}
	return nil
}

func (c *UDPConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: c.LocalAddr(), Err: err}
}

func (c *UDPConn) readErr(err error) error {
	return &net.OpError{Op: "read", Net: "udp", Source: c.LocalAddr(), Err: err}
}

// ReadFromUDPAddrPort reads one datagram into b and returns its length
// and source (a link-local source has the interface's name as its zone);
// a datagram longer than b is cut short, as on a kernel
// socket. It blocks until one is there, the read deadline passes or the
// conn is closed. It allocates nothing.
func (c *UDPConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	for {
		if c.closing.Load() {
			return 0, netip.AddrPort{}, c.readErr(net.ErrClosed)
		}
		expired := c.rdl.wait()
		select {
		case <-expired:
			return 0, netip.AddrPort{}, c.readErr(os.ErrDeadlineExceeded)
		default:
		}
		if n, src, ok := c.rx.pop(b); ok {
			return n, src, nil
		}
		select {
		case <-c.rx.notify:
		case <-expired:
			return 0, netip.AddrPort{}, c.readErr(os.ErrDeadlineExceeded)
		case <-c.done:
			return 0, netip.AddrPort{}, c.readErr(net.ErrClosed)
		case <-c.broken:
			return 0, netip.AddrPort{}, c.readErr(*c.rxErr.Load())
		}
	}
}

// ReadFrom implements net.PacketConn; the address is a *net.UDPAddr.
// It allocates the address (one allocation per datagram);
// ReadFromUDPAddrPort and ReadBatch allocate nothing.
func (c *UDPConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, src, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, newUDPAddr(src), nil
}

// udpAddr is a net.UDPAddr with room for its IP, so that one allocation
// makes both.
type udpAddr struct {
	net.UDPAddr
	ip [16]byte
}

// newUDPAddr is net.UDPAddrFromAddrPort in one allocation.
func newUDPAddr(ap netip.AddrPort) *net.UDPAddr {
	a := new(udpAddr)
	ip := ap.Addr()
	if ip.Is4() {
		b := ip.As4()
		a.IP = append(a.ip[:0], b[:]...)
	} else {
		b := ip.As16()
		a.IP = append(a.ip[:0], b[:]...)
	}
	a.Port, a.Zone = int(ap.Port()), ip.Zone()
	return &a.UDPAddr
}

// WriteTo implements net.PacketConn; addr must be a *net.UDPAddr.
func (c *UDPConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	a, ok := addr.(*net.UDPAddr)
	if !ok || a == nil {
		return 0, &net.OpError{Op: "write", Net: "udp", Source: c.LocalAddr(), Addr: addr, Err: unix.EINVAL}
	}
	return c.WriteToUDPAddrPort(b, a.AddrPort())
}
