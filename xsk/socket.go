package xsk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/caps"
	"github.com/xdpkit/xdpkit/umem"
)

// Mode selects copy or zero-copy binding.
type Mode int

const (
	// ModeAuto lets the kernel use zero-copy where the driver supports
	// it, copy mode otherwise.
	ModeAuto Mode = iota
	// ModeCopy forces copy mode (XDP_COPY).
	ModeCopy
	// ModeZeroCopy forces zero-copy (XDP_ZEROCOPY); New fails with
	// ErrNotSupported where the driver lacks it.
	ModeZeroCopy
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeCopy:
		return "copy"
	case ModeZeroCopy:
		return "zero-copy"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// DefaultRingSize is the size of each ring when Config leaves it 0.
const DefaultRingSize = 2048

// Config configures a Socket. A nil *Config means all defaults.
type Config struct {
	// Ring sizes, powers of two; 0 means DefaultRingSize.
	RXSize, TXSize, FillSize, CompletionSize uint32
	// NoRX and NoTX leave out the RX or the TX ring (a TX-only or RX-only
	// socket). Fill and Completion rings are always created. A socket
	// without RX ring that binds in zero-copy mode has its Fill ring
	// stocked by New (see Stocked): the driver takes the queue's receive
	// buffers from it, also for the traffic that goes to the kernel.
	NoRX, NoTX bool
	// Mode chooses copy or zero-copy; the default tries zero-copy first.
	Mode Mode
	// NoNeedWakeup turns XDP_USE_NEED_WAKEUP off: every kick is then a
	// system call.
	NoNeedWakeup bool
	// Mode, NoNeedWakeup and MultiBuffer apply to the first socket of a
	// UMEM; the sockets that share it inherit them.
	//
	// MultiBuffer binds with XDP_USE_SG: packets larger than one frame
	// arrive and leave as chains of descriptors linked by OptContd.
	// Without it the kernel drops such packets on RX.
	MultiBuffer bool
	// PreferBusyPoll sets SO_PREFER_BUSY_POLL, BusyPollTimeout
	// SO_BUSY_POLL and BusyPollBudget SO_BUSY_POLL_BUDGET (CAP_NET_ADMIN
	// to raise them). The kernel cannot read the budget back.
	PreferBusyPoll  bool
	BusyPollTimeout time.Duration
	BusyPollBudget  int
	// MaxTXBudget sets XDP_MAX_TX_SKB_BUDGET: how many frames one copy-mode
	// sendto may send (the kernel's default is 32). The kernel takes
	// 32..TXSize; New fails with ErrTXBudget outside that range. A kernel
	// without the option (before Linux 6.17) keeps its default: the socket
	// works and Features().TXBudget says 0.
	MaxTXBudget uint32
	// BindTimeout bounds how long New retries a bind that fails with
	// EBUSY: the kernel frees a queue from a work item (xp_release_deferred)
	// after the socket that held it closed, later on a busy machine, so a
	// program started right after another one on the same queue can find
	// it still held. 0 means 2 s; negative means no retry.
	BindTimeout time.Duration
}

// Socket is an AF_XDP socket bound to one queue of one interface.
//
// Each ring is single-producer, single-consumer: use each from one
// goroutine at a time. Close may run while other goroutines use the
// rings: their operations then take nothing (0, false) and kicks, waits
// and Stats return os.ErrClosed; Closed tells them apart from an empty
// or full ring.
type Socket struct {
	fd int // the AF_XDP socket
	// A duplicate of fd registered with the runtime poller, made on the
	// first WaitRX or WaitTX: a registered socket is polled by the
	// netpoller's epoll on every wake-up, which in copy mode also
	// transmits (xsk_poll), so sockets that never wait stay out of it.
	pollOnce   sync.Once
	pollErr    error
	file       *os.File
	rc         syscall.RawConn
	umem       *umem.UMEM
	first      bool   // fd is the UMEM's registration
	shared     int    // otherwise: a duplicate of a bound socket's fd, until bind
	inherited  uint16 // and that socket's bind flags
	ifindex    int
	ifname     string
	mac        net.HardwareAddr
	queue      int
	zc         bool
	wakeup     bool // XDP_USE_NEED_WAKEUP
	sg         bool
	stocked    int      // frames stockFill lent to the Fill ring
	stockAddrs []uint64 // their addresses, given back by Close
	features   Features // optional kernel features in use
	owner      *Socket  // NewShared: the socket whose Fill and Completion rings this one uses

	share sharing // the sockets of NewShared on this one's Fill and Completion rings
	rg    guard   // the Fill and Completion rings' guard, closed by closeRings

	fill FillRing
	comp CompletionRing
	rx   *RXRing
	tx   *TXRing

	kicksTX, kicksRX, kicksAgain atomic.Uint64

	closed    atomic.Bool
	g         guard
	closeOnce sync.Once
	closeErr  error
	after     afterClose // OnClose's functions
}

var _ io.Closer = (*Socket)(nil)

// New creates an AF_XDP socket on queue of the interface named ifname,
// with frames from u, and binds it. The first socket of a UMEM binds with
// the descriptor the UMEM was registered on; the others share the UMEM
// (XDP_SHARED_UMEM) and must be on another queue or interface.
func New(ifname string, queue int, u *umem.UMEM, cfg *Config) (*Socket, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	for _, p := range []*uint32{&c.RXSize, &c.TXSize, &c.FillSize, &c.CompletionSize} {
		if *p == 0 {
			*p = DefaultRingSize
		}
		if *p&(*p-1) != 0 || *p > 1<<20 {
			return nil, fmt.Errorf("%w: got %d", ErrRingSize, *p)
		}
	}
	if u == nil {
		return nil, errors.New("xsk: nil UMEM")
	}
	if c.NoRX && c.NoTX {
		return nil, fmt.Errorf("%w: a socket needs an RX or a TX ring (NoRX and NoTX both set)", ErrNoRing)
	}
	if err := checkTXBudget(&c); err != nil {
		return nil, err
	}
	if queue < 0 {
		return nil, fmt.Errorf("%w: queue %d", ErrQueue, queue)
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrNoDevice, ifname, err)
	}
	if n, err := queueCount(ifname); err == nil && queue >= n {
		return nil, fmt.Errorf("%w: queue %d of %s, which has %d", ErrQueue, queue, ifname, n)
	}
	fd, shared, flags, err := u.AttachSocket()
	if err != nil {
		return nil, fmt.Errorf("xsk: UMEM: %w", err)
	}
	s := &Socket{fd: fd, umem: u, first: fd >= 0, shared: shared, inherited: flags,
		ifindex: ifi.Index, ifname: ifname, mac: ifi.HardwareAddr, queue: queue}
	if err := s.init(&c); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Socket) init(c *Config) error {
	if !s.first {
		fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return caps.Wrap("xsk: socket(AF_XDP)", caps.NetRaw, os.NewSyscallError("socket", err))
		}
		s.fd = fd
	}
	sizes := []struct {
		opt  int
		size uint32
		skip bool
	}{
		{unix.XDP_UMEM_FILL_RING, c.FillSize, false},
		{unix.XDP_UMEM_COMPLETION_RING, c.CompletionSize, false},
		{unix.XDP_RX_RING, c.RXSize, c.NoRX},
		{unix.XDP_TX_RING, c.TXSize, c.NoTX},
	}
	for _, r := range sizes {
		if r.skip {
			continue
		}
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, r.opt, int(r.size)); err != nil {
			return fmt.Errorf("xsk: ring size: %w", os.NewSyscallError("setsockopt", err))
		}
	}
	off, err := mmapOffsets(s.fd)
	if err != nil {
		return fmt.Errorf("xsk: %w", err)
	}
	s.fill.g, s.comp.g = &s.rg, &s.rg
	if err := s.fill.mmap(s.fd, off.Fr, c.FillSize); err != nil {
		return fmt.Errorf("xsk: fill ring: %w", err)
	}
	s.fill.umem = s.umem
	if err := s.comp.mmap(s.fd, off.Cr, c.CompletionSize); err != nil {
		return fmt.Errorf("xsk: completion ring: %w", err)
	}
	s.comp.umem = s.umem
	if err := s.mapRXTX(&off, c); err != nil {
		return err
	}
	if err := s.setOptions(c); err != nil {
		return err
	}
	if err := s.bind(c); err != nil {
		return err
	}
	if err := s.readOptions(); err != nil {
		return err
	}
	if s.zc && c.NoRX {
		if err := s.stockFill(c); err != nil {
			return err
		}
	}
	s.probeStats()
	return nil
}

func (s *Socket) setOptions(c *Config) error {
	set := func(level, opt, val int, name string) error {
		if err := unix.SetsockoptInt(s.fd, level, opt, val); err != nil {
			return caps.Wrap("xsk: setsockopt("+name+")", caps.NetAdmin, os.NewSyscallError("setsockopt", err))
		}
		return nil
	}
	if c.PreferBusyPoll {
		if err := set(unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"); err != nil {
			return err
		}
	}
	if c.BusyPollTimeout > 0 {
		if err := set(unix.SOL_SOCKET, unix.SO_BUSY_POLL, int(c.BusyPollTimeout/time.Microsecond), "SO_BUSY_POLL"); err != nil {
			return err
		}
	}
	if c.BusyPollBudget > 0 {
		if err := set(unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET, c.BusyPollBudget, "SO_BUSY_POLL_BUDGET"); err != nil {
			return err
		}
	}
	if c.MaxTXBudget > 0 {
		if err := s.setTXBudget(c); err != nil {
			return err
		}
	}
	return nil
}

func (s *Socket) bind(c *Config) error {
	var flags uint16
	switch c.Mode {
	case ModeCopy:
		flags |= unix.XDP_COPY
	case ModeZeroCopy:
		flags |= unix.XDP_ZEROCOPY
	}
	if !c.NoNeedWakeup {
		flags |= unix.XDP_USE_NEED_WAKEUP
		s.wakeup = true
	}
	if c.MultiBuffer {
		flags |= unix.XDP_USE_SG
		s.sg = true
	}
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(s.ifindex), QueueID: uint32(s.queue)}
	if !s.first {
		// A socket sharing the UMEM must not name flags: it inherits
		// copy/zero-copy, need_wakeup and multi-buffer from the first.
		flags = s.inherited
		s.wakeup = flags&unix.XDP_USE_NEED_WAKEUP != 0
		s.sg = flags&unix.XDP_USE_SG != 0
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(s.shared)
	}
	timeout := c.BindTimeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	if !s.first {
		defer s.closeShared() // the bind holds the UMEM from now on
	}
	for {
		err := unix.Bind(s.fd, sa)
		if err == nil {
			s.umem.SocketBound(s.fd, flags)
			return nil
		}
		if errors.Is(err, unix.EBUSY) && time.Now().Before(deadline) {
			time.Sleep(delay)
			delay = min(2*delay, 50*time.Millisecond)
			continue
		}
		return s.bindError(c, os.NewSyscallError("bind", err))
	}
}

func (s *Socket) bindError(c *Config, err error) error {
	where := fmt.Sprintf("%s queue %d", s.ifname, s.queue)
	if c.Mode == ModeZeroCopy && s.first && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
		if reason := zeroCopyRefusal(s.ifname, s.queue, c, err); reason != "" {
			return &FeatureError{Feature: "zero-copy on " + where, Reason: reason, Err: err}
		}
	}
	switch {
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%w: %s: %w", ErrBusy, where, err)
	case errors.Is(err, unix.EOPNOTSUPP) && c.Mode == ModeZeroCopy:
		return fmt.Errorf("%w: zero-copy on %s: %w", ErrNotSupported, where, err)
	case errors.Is(err, unix.EOPNOTSUPP) && c.MultiBuffer:
		return fmt.Errorf("%w: multi-buffer (XDP_USE_SG) on %s: %w", ErrNotSupported, where, err)
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("%w: %s: %w", ErrNoDevice, where, err)
	case errors.Is(err, unix.EINVAL):
		if n, qerr := queueCount(s.ifname); qerr == nil && s.queue >= n {
			return fmt.Errorf("%w: %s, which has %d: %w", ErrQueue, where, n, err)
		}
		if c.MultiBuffer && s.first {
			// Before Linux 6.6 bind refuses the unknown XDP_USE_SG flag.
			return fmt.Errorf("%w: multi-buffer (XDP_USE_SG, Linux 6.6) on %s: %w", ErrNotSupported, where, err)
		}
	}
	return caps.Wrap("xsk: bind "+where, caps.NetAdmin, err)
}

func (s *Socket) initPoller() error {
	dup, err := unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("xsk: %w", os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err))
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return fmt.Errorf("xsk: %w", os.NewSyscallError("fcntl(O_NONBLOCK)", err))
	}
	s.file = os.NewFile(uintptr(dup), fmt.Sprintf("xsk:%s/%d", s.ifname, s.queue))
	rc, err := s.file.SyscallConn()
	if err != nil {
		return fmt.Errorf("xsk: %w", err)
	}
	s.rc = rc
	return nil
}

// Close unmaps the rings and closes the socket, which unbinds its queue.
// It is idempotent. While sockets of NewShared use the socket's Fill and
// Completion rings, Close closes its RX and TX rings and fails its kicks,
// waits and Stats with os.ErrClosed, but leaves the Fill and Completion
// rings and the descriptor to the last of those sockets to close, which
// also runs OnClose's functions then and returns their errors.
func (s *Socket) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.g.close() // no ring operation or kick in progress after this
		var errs []error
		// Close the poller's duplicate first: it wakes a goroutine in
		// WaitRX or WaitTX and waits until none is reading the rings.
		s.pollOnce.Do(func() { s.pollErr = os.ErrClosed }) // none made from now on
		if s.file != nil {
			errs = append(errs, s.file.Close())
		}
		// Unmap before closing the socket: a mapping holds the socket,
		// and with it the queue, until it goes.
		if s.rx != nil {
			errs = append(errs, s.rx.unmap())
		}
		if s.tx != nil {
			errs = append(errs, s.tx.unmap())
		}
		s.closeShared()
		// The Fill and Completion rings, and the descriptor that holds
		// them, stay while sockets of NewShared use them: the last one
		// to close closes them.
		if s.share.release(true) {
			errs = append(errs, s.closeRings())
		}
		if s.owner != nil && s.owner.share.release(false) {
			errs = append(errs, s.owner.closeRings())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// closeRings ends Close once no socket uses the Fill and Completion
// rings: it unmaps them, closes the descriptor and runs OnClose's
// functions.
func (s *Socket) closeRings() error {
	s.rg.close() // no Fill or Completion operation in progress after this
	errs := []error{s.fill.unmap(), s.comp.unmap()}
	s.umem.DetachSocket(s.fd)
	// s.fd keeps its (now stale) number: other goroutines may read it
	// unsynchronised; FD and every use check closed or the guard.
	if s.fd >= 0 {
		if err := unix.Close(s.fd); err != nil {
			errs = append(errs, os.NewSyscallError("close", err))
		}
	}
	// The frames stockFill lent are the kernel's until the socket is
	// gone: now they are free again.
	if n := len(s.stockAddrs); n > 0 {
		s.umem.Moved(umem.Fill, umem.Held, n)
		if err := s.umem.PutBatch(s.stockAddrs); err != nil {
			errs = append(errs, fmt.Errorf("xsk: the Fill ring's stock: %w", err))
		}
		s.stockAddrs = nil
	}
	s.after.run()
	return errors.Join(errs...)
}

// Err returns and clears the socket's pending error (SO_ERROR): ENETDOWN
// after its interface went away, which also unbinds the socket. nil when
// there is none.
func (s *Socket) Err() error {
	if !s.g.enter() {
		return os.ErrClosed
	}
	defer s.g.exit()
	v, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return fmt.Errorf("xsk: %w", os.NewSyscallError("getsockopt(SO_ERROR)", err))
	}
	if v != 0 {
		return fmt.Errorf("xsk: %s queue %d: %w", s.ifname, s.queue, syscall.Errno(v))
	}
	return nil
}

// Closed reports whether Close was called.
func (s *Socket) Closed() bool { return s.closed.Load() }

// closeShared closes the duplicate descriptor AttachSocket gave for
// sharing the UMEM.
func (s *Socket) closeShared() {
	if s.shared >= 0 {
		unix.Close(s.shared)
		s.shared = -1
	}
}

// FD is the socket's file descriptor, to register in an XSKMAP; -1
// after Close.
func (s *Socket) FD() int {
	if s.closed.Load() {
		return -1
	}
	return s.fd
}

// Queue is the queue the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// Ifindex is the index of the interface the socket is bound to.
func (s *Socket) Ifindex() int { return s.ifindex }

// Ifname is the name of the interface the socket is bound to.
func (s *Socket) Ifname() string { return s.ifname }

// UMEM is the socket's packet memory.
func (s *Socket) UMEM() *umem.UMEM { return s.umem }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode
// (XDP_OPTIONS); false means copy mode.
func (s *Socket) ZeroCopy() bool { return s.zc }

// MultiBuffer reports whether the socket was bound with XDP_USE_SG.
func (s *Socket) MultiBuffer() bool { return s.sg }

// Fill returns the socket's Fill ring (for a socket of NewShared, its
// first socket's).
func (s *Socket) Fill() *FillRing {
	if s.owner != nil {
		return s.owner.Fill()
	}
	return &s.fill
}

// Completion returns the socket's Completion ring (for a socket of
// NewShared, its first socket's).
func (s *Socket) Completion() *CompletionRing {
	if s.owner != nil {
		return s.owner.Completion()
	}
	return &s.comp
}

// RX returns the RX ring, or nil for a socket created with NoRX.
func (s *Socket) RX() *RXRing { return s.rx }

// TX returns the TX ring, or nil for a socket created with NoTX.
func (s *Socket) TX() *TXRing { return s.tx }

// KickTX asks the kernel to send what is on the TX ring, with a system
// call only when the ring's need_wakeup flag is set (or need_wakeup is
// off). EAGAIN, EBUSY and ENOBUFS mean the kernel will take more later:
// KickTX returns nil and the caller kicks again while TX().Pending() > 0.
// Other failures, e.g. ENETDOWN or ENXIO when the link went away, are
// returned.
func (s *Socket) KickTX() error {
	if s.tx == nil {
		return ErrNoRing
	}
	if s.wakeup && !s.tx.NeedWakeup() {
		if s.closed.Load() {
			return os.ErrClosed
		}
		return nil
	}
	return s.WakeTX()
}

// The kicks use RawSyscall: sendto and recvfrom with MSG_DONTWAIT never
// block, and their work is bounded (copy mode sends at most the TX budget,
// 32 frames by default, per call), but one call can take tens of
// microseconds, long enough for the runtime to hand the P away during an
// ordinary Syscall and make the goroutine wait for one on return. The
// txonly rows of `make bench` (bench/out/summary.md) measure TX-only on
// veth pinned to one CPU with GOMAXPROCS=1 against the C reference.

// WakeTX makes the sendto system call unconditionally (busy polling).
func (s *Socket) WakeTX() error {
	if !s.g.enter() {
		return os.ErrClosed
	}
	defer s.g.exit()
	s.kicksTX.Add(1)
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return s.kickResult("sendto", e)
}

// KickRX wakes the kernel when the Fill ring's need_wakeup flag is set,
// so it takes the frames put on the Fill ring since it ran out.
func (s *Socket) KickRX() error {
	if s.wakeup && !s.Fill().NeedWakeup() {
		if s.closed.Load() {
			return os.ErrClosed
		}
		return nil
	}
	return s.WakeRX()
}

// WakeRX makes the recvfrom system call unconditionally (busy polling).
func (s *Socket) WakeRX() error {
	if !s.g.enter() {
		return os.ErrClosed
	}
	defer s.g.exit()
	s.kicksRX.Add(1)
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return s.kickResult("recvfrom", e)
}

func (s *Socket) kickResult(op string, e syscall.Errno) error {
	switch e {
	case 0:
		return nil
	case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
		s.kicksAgain.Add(1)
		return nil
	}
	return fmt.Errorf("xsk: %s queue %d: %w", s.ifname, s.queue, os.NewSyscallError(op, e))
}

// Counters are the socket's own counts of system calls.
type Counters struct {
	KicksTX    uint64 // sendto calls
	KicksRX    uint64 // recvfrom calls
	KicksAgain uint64 // kicks answered EAGAIN, EBUSY or ENOBUFS
}

// Counters returns the socket's system-call counts.
func (s *Socket) Counters() Counters {
	return Counters{KicksTX: s.kicksTX.Load(), KicksRX: s.kicksRX.Load(), KicksAgain: s.kicksAgain.Load()}
}

// Stats is struct xdp_statistics.
type Stats struct {
	RXDropped           uint64 // dropped for reasons other than invalid descriptors (e.g. too large without MultiBuffer)
	RXInvalidDescs      uint64
	TXInvalidDescs      uint64
	RXRingFull          uint64 // dropped because the RX ring was full
	RXFillRingEmptyDesc uint64 // times the Fill ring was empty when a packet came
	TXRingEmptyDescs    uint64 // times the kernel found the TX ring empty
}

var _ [48]byte = [unsafe.Sizeof(Stats{})]byte{}

// Stats reads the kernel's XDP_STATISTICS for the socket.
func (s *Socket) Stats() (Stats, error) {
	if !s.g.enter() {
		return Stats{}, os.ErrClosed
	}
	defer s.g.exit()
	st, _, err := getStats(s.fd)
	if err != nil {
		if s.features.Stats == StatsNone {
			return st, fmt.Errorf("xsk: %w: %w", ErrNotSupported, err)
		}
		return st, fmt.Errorf("xsk: %w", err)
	}
	return st, nil
}

var aLongTimeAgo = time.Unix(1, 0)

// WaitRX blocks until the RX ring has descriptors or ctx ends, without
// holding an OS thread: the socket is registered with the runtime's
// poller. It returns ctx.Err() when ctx ends first, and os.ErrClosed
// after Close. Only one goroutine may wait on a socket at a time.
func (s *Socket) WaitRX(ctx context.Context) error {
	if s.rx == nil {
		return ErrNoRing
	}
	return s.wait(ctx, false, func() bool { return s.rx.queued() > 0 })
}

// WaitTX blocks until the Completion ring has entries or the TX ring has
// room, or ctx ends.
func (s *Socket) WaitTX(ctx context.Context) error {
	if s.tx == nil {
		return ErrNoRing
	}
	if s.owner != nil {
		comp := s.owner.Completion() // Len enters the rings' guard
		return s.wait(ctx, true, func() bool { return comp.Len() > 0 || s.tx.pending() < s.tx.size })
	}
	return s.wait(ctx, true, func() bool { return s.comp.queued() > 0 || s.tx.pending() < s.tx.size })
}

// wait parks on the runtime poller until ready() holds: for readability
// (EPOLLIN: RX descriptors) or, with write, writability (EPOLLOUT: room
// on the TX ring).
func (s *Socket) wait(ctx context.Context, write bool, ready func() bool) error {
	// ready reads ring memory: only inside the guard, and a closed
	// socket is "ready" so that the wait ends with os.ErrClosed.
	check := func() bool {
		if !s.g.enter() {
			return true
		}
		defer s.g.exit()
		return ready()
	}
	if check() {
		if s.closed.Load() {
			return os.ErrClosed
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.pollOnce.Do(func() { s.pollErr = s.initPoller() })
	if s.pollErr != nil {
		return s.pollErr
	}
	setDeadline, poll := s.file.SetReadDeadline, s.rc.Read
	if write {
		setDeadline, poll = s.file.SetWriteDeadline, s.rc.Write
	}
	if ctx.Done() != nil {
		// The callback may still be about to set its deadline when stop
		// reports it started: wait for it before clearing the deadline,
		// or a late one would fail every later wait at once.
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = setDeadline(aLongTimeAgo)
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired
				_ = setDeadline(time.Time{})
			}
		}()
	}
	err := poll(func(uintptr) bool { return check() })
	if err == nil && s.closed.Load() {
		return os.ErrClosed
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.closed.Load() {
			return os.ErrClosed
		}
		return fmt.Errorf("xsk: wait: %w", err)
	}
	return nil
}

// mapRXTX maps the socket's own RX and TX rings, those c asks for, at
// the offsets the kernel gave.
func (s *Socket) mapRXTX(off *unix.XDPMmapOffsets, c *Config) error {
	if !c.NoRX {
		s.rx = &RXRing{umem: s.umem}
		s.rx.g = &s.g
		if err := s.rx.mmap(s.fd, off.Rx, c.RXSize); err != nil {
			return fmt.Errorf("xsk: RX ring: %w", err)
		}
	}
	if !c.NoTX {
		s.tx = &TXRing{umem: s.umem}
		s.tx.g = &s.g
		if err := s.tx.mmap(s.fd, off.Tx, c.TXSize); err != nil {
			return fmt.Errorf("xsk: TX ring: %w", err)
		}
	}
	return nil
}

// readOptions reads back what the bind gave: zero-copy or copy mode.
func (s *Socket) readOptions() error {
	opts, err := unix.GetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_OPTIONS)
	if err != nil {
		return fmt.Errorf("xsk: %w", os.NewSyscallError("getsockopt(XDP_OPTIONS)", err))
	}
	s.zc = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	return nil
}
