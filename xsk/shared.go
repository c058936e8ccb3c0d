package xsk

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/caps"
)

// ErrShared reports a NewShared request the kernel cannot satisfy.
var ErrShared = errors.New("xsk: cannot share the socket's queue")

// NewShared creates another socket on first's interface and queue that
// shares first's UMEM and its Fill and Completion rings (XDP_SHARED_UMEM
// with first's descriptor: the kernel lets sockets of one queue share
// only one buffer pool, and refuses one with rings of its own). Frames a
// program redirects to either socket come from first's Fill ring, and
// frames either sends complete on first's Completion ring: the new
// socket's Fill and Completion return first's, to be used from one
// goroutine at a time for both sockets. An XDP program steers packets
// between the sockets through an XSKMAP ([Map.RegisterKey]).
//
// Of cfg, only RXSize, TXSize, NoRX, NoTX and the busy-poll fields
// apply (copy or zero-copy, need_wakeup and multi-buffer are first's);
// the socket needs an RX or a TX ring.
//
// Because the rings serve several sockets, the application drives them
// itself: rxpath.New and txpath.New refuse a socket of NewShared, and
// first while one is open (see SharesRings), with their ErrConfig. A
// Poller or Sender made on first before NewShared is not told: do not
// share the rings of a socket one of them uses.
//
// The sockets may be closed in any order. Closing first while sockets of
// NewShared are open closes first's RX and TX rings and ends its kicks,
// but its Fill and Completion rings, which those sockets use, and its
// descriptor stay until the last of them is closed; that Close then
// closes them and runs first's OnClose functions. Until then the kernel
// keeps first bound: frames a program still redirects to it wait on its
// RX ring, out of reach, so remove it from the XSKMAP before closing it.
func NewShared(first *Socket, cfg *Config) (*Socket, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	for _, p := range []*uint32{&c.RXSize, &c.TXSize} {
		if *p == 0 {
			*p = DefaultRingSize
		}
		if *p&(*p-1) != 0 || *p > 1<<20 {
			return nil, fmt.Errorf("%w: got %d", ErrRingSize, *p)
		}
	}
	if c.NoRX && c.NoTX {
		return nil, fmt.Errorf("%w: a socket sharing a queue needs an RX or a TX ring", ErrShared)
	}
	if first == nil {
		return nil, fmt.Errorf("%w: nil socket", ErrShared)
	}
	if first.owner != nil {
		first = first.owner
	}
	if !first.g.enter() { // first's fd stays open while we hold the guard
		return nil, os.ErrClosed
	}
	defer first.g.exit()
	u := first.umem
	first.share.add()                       // until s's Close
	fd, dup, flags, err := u.AttachSocket() // counts the socket, so the UMEM stays
	if err != nil {
		first.share.release(false) // first is open: we hold its guard
		return nil, fmt.Errorf("xsk: UMEM: %w", err)
	}
	if fd >= 0 { // first is bound, so the UMEM has a bound socket: not reached
		first.share.release(false)
		u.DetachSocket(fd)
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s queue %d is not bound", ErrShared, first.ifname, first.queue)
	}
	s := &Socket{fd: -1, umem: u, shared: dup, inherited: flags, owner: first,
		ifindex: first.ifindex, ifname: first.ifname, mac: first.mac, queue: first.queue}
	if err := s.initShared(&c); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// SharesRings reports whether the socket's Fill and Completion rings
// serve more than one socket: it is a socket of NewShared, or the first
// socket of one that is open. A component that takes the frames of the
// socket's Fill and Completion rings as its own, as rxpath.Poller and
// txpath.Sender do, cannot work on such a socket.
func (s *Socket) SharesRings() bool {
	if s.owner != nil {
		return true
	}
	s.share.mu.Lock()
	defer s.share.mu.Unlock()
	return s.share.n > 0
}

// sharing counts the sockets of NewShared on a socket's Fill and
// Completion rings, which stay until the last of them and the socket
// itself are closed (closeRings): in either close order, the rings that
// hold frames stay reachable while a socket can still use them.
type sharing struct {
	mu     sync.Mutex
	n      int  // open sockets of NewShared
	closed bool // the socket's own Close ran
}

// add counts a socket of NewShared; the caller holds the first socket's
// guard, so its Close has not run.
func (sh *sharing) add() {
	sh.mu.Lock()
	sh.n++
	sh.mu.Unlock()
}

// release records the Close of the socket itself (self) or of a socket
// of NewShared, and reports whether that was the last user of the rings:
// true once, for the caller to closeRings.
func (sh *sharing) release(self bool) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if self {
		sh.closed = true
	} else {
		sh.n--
	}
	return sh.closed && sh.n == 0
}

func (s *Socket) initShared(c *Config) error {
	s.closeShared() // the bind names first's descriptor, not a duplicate
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return caps.Wrap("xsk: socket(AF_XDP)", caps.NetRaw, os.NewSyscallError("socket", err))
	}
	s.fd = fd
	if !c.NoRX {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_RX_RING, int(c.RXSize)); err != nil {
			return fmt.Errorf("xsk: ring size: %w", os.NewSyscallError("setsockopt", err))
		}
	}
	if !c.NoTX {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_TX_RING, int(c.TXSize)); err != nil {
			return fmt.Errorf("xsk: ring size: %w", os.NewSyscallError("setsockopt", err))
		}
	}
	off, err := mmapOffsets(s.fd)
	if err != nil {
		return fmt.Errorf("xsk: %w", err)
	}
	if err := s.mapRXTX(&off, c); err != nil {
		return err
	}
	bc := *c
	bc.MaxTXBudget = 0 // copy-mode TX budget: first's option, not shared
	if err := s.setOptions(&bc); err != nil {
		return err
	}
	s.wakeup = s.inherited&unix.XDP_USE_NEED_WAKEUP != 0
	s.sg = s.inherited&unix.XDP_USE_SG != 0
	sa := &unix.SockaddrXDP{Flags: unix.XDP_SHARED_UMEM, Ifindex: uint32(s.ifindex),
		QueueID: uint32(s.queue), SharedUmemFD: uint32(s.owner.fd)}
	if err := unix.Bind(s.fd, sa); err != nil {
		err = os.NewSyscallError("bind", err)
		where := fmt.Sprintf("%s queue %d", s.ifname, s.queue)
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%w: %s (XDP_SHARED_UMEM with its first socket): %w", ErrShared, where, err)
		}
		return caps.Wrap("xsk: bind "+where, caps.NetAdmin, err)
	}
	if err := s.readOptions(); err != nil {
		return err
	}
	s.probeStats()
	return nil
}
