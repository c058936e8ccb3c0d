package rxpath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// closedWait bounds every sleep, so that a socket closed by another
// goroutine, or unbound because its interface went away, ends Run within
// that time (when idle: 2 wake-ups and 2 getsockopt calls a second per
// socket).
const closedWait = 500 * time.Millisecond

// starveWait is how long a poller sleeps when a Fill ring is empty and the
// allocator has no frame to put on it: no packet can arrive then, so it
// looks again for frames that the handler gave back.
const starveWait = time.Millisecond

// pool is the poller's view of one UMEM.
type pool struct {
	u     *umem.UMEM
	mem   []byte
	size  uint64
	fsize uint32
	shift uint
	// lent has a bit per frame that the poller put on a Fill ring and
	// has not had back on an RX ring yet. Only the Run goroutine (or
	// Reclaim, never at the same time) touches it.
	lent []uint64
	// stashed has a bit per frame in a sock's stash, so that Recycle
	// refuses a frame given back twice.
	stashed []uint64
	nsock   int
	sends   bool // a socket of the poller on this UMEM has a TX ring
}

func newPool(u *umem.UMEM) *pool {
	words := (u.FrameCount() + 63) / 64
	return &pool{u: u, mem: u.Bytes(), size: u.Size(), fsize: u.FrameSize(),
		shift: uint(bits.TrailingZeros32(u.FrameSize())),
		lent:  make([]uint64, words), stashed: make([]uint64, words)}
}

func (pl *pool) frame(addr uint64) uint64 { return addr >> pl.shift }

// take clears the lent bit of addr's frame and reports whether it was set.
// addr must be inside the UMEM.
func (pl *pool) take(addr uint64) bool {
	i := pl.frame(addr)
	w, b := &pl.lent[i>>6], uint64(1)<<(i&63)
	if *w&b == 0 {
		return false
	}
	*w &^= b
	return true
}

// give sets the lent bit of addr's frame (and clears its stashed bit:
// produce gives the stash's frames).
func (pl *pool) give(addr uint64) {
	i := pl.frame(addr)
	pl.lent[i>>6] |= 1 << (i & 63)
	pl.stashed[i>>6] &^= 1 << (i & 63)
}

// unstash clears the stashed bits of addrs' frames.
func (pl *pool) unstash(addrs []uint64) {
	for _, a := range addrs {
		i := pl.frame(a)
		pl.stashed[i>>6] &^= 1 << (i & 63)
	}
}

// sock is the poller's state for one socket.
type sock struct {
	s    *xsk.Socket
	idx  int
	rx   *xsk.RXRing
	fill *xsk.FillRing
	pool *pool

	// descs[off:np] were taken from the RX ring and not handled yet (the
	// head of a packet whose rest has not arrived, or what followed it).
	descs   []xsk.Desc
	off, np int
	discard bool // drop descriptors up to the end of the current chain

	stash   []uint64 // received frames to give back, cap fixed
	base    uint64   // clears the offset into a frame: ^(frame size - 1)
	tmp     []uint64 // frames from the allocator, cap fixed
	target  int      // frames to keep on the Fill ring
	starved bool
	// out estimates the frames the kernel holds for s: put on its Fill
	// ring and not yet taken off its RX ring. It is at least what the
	// Fill ring holds, so refill reads the ring's consumer index (a line
	// the kernel writes) only when out says a batch may be missing, or
	// every refillCheck refills (frames may also come back elsewhere).
	out    int
	unread int // refills since the Fill ring was last read
	// recycles: Recycle gave frames back for this socket during this
	// Run (Run clears it as it starts), so refill takes frames from the
	// allocator only while the ring holds less than half the target,
	// when it is empty, or (forced) for frames the kernel and the stash
	// do not account for: the frames on the ring stay the ones that
	// circulate, in the order they come back.
	recycles bool

	c   sockCounters // written by Run only
	pub sockMirror   // c, as of the last publish
}

// closedErr is the error that ends Run when s was closed under it.
func (s *sock) closedErr() error {
	return fmt.Errorf("rxpath: socket %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.ErrClosed)
}

// Poller receives from a set of AF_XDP sockets; see the package
// documentation.
type Poller struct {
	cfg    Config
	socks  []*sock
	pools  []*pool
	ep     *os.File // epoll instance watching every socket
	epfd   int
	armed  bool // the sockets are armed in ep: see arm
	busy   int  // rounds that took packets since the last sleep (see disarmAfter)
	rc     syscall.RawConn
	ready  func(uintptr) bool
	tf     *os.File // timerfd of naps
	trc    syscall.RawConn
	tfd    int
	napped func(uintptr) bool
	pfds   []unix.PollFd // the flow sleep's ppoll set (see thread.go)
	// No packet came for threadWait, so sleeps go through the runtime's
	// poller until a socket wakes one (see thread.go).
	threadIdle bool
	yieldAt    time.Duration // when the goroutine last yielded before a flow sleep (since epoch)
	flowing    bool          // in the flow sleep (see flowEnter)
	flowRetry  time.Duration // not before then may a refused flowEnter ask again (since epoch; 0: now)

	closeMu  sync.Mutex // serialises Close
	running  atomic.Bool
	stop     atomic.Bool
	closed   atomic.Bool
	next     int    // socket that starts the next round
	spinIdle uint64 // idle passes of a spinning poller

	// The idle policy (governor.go): asked after every empty round.
	governor
	epoch time.Time // Run's start: round times are offsets from it

	readyCalls int       // the ready checks of a runtime sleep (blocked: more than one)
	deadline   time.Time // the epoll file's read deadline, zero if none
	// deadlineWakeups is Stats.Wakeups when deadline was set.
	deadlineWakeups uint64

	h       Handler
	copier  Copier
	ender   RoundEnder // h, if it wants to hear of each round's end
	copyMax int
	copyBuf []byte
	touched byte // touchFirst's sums (Config.Prefetch)
	pkt     Packet
	segs    [MaxSegments][]byte
	// stashErr: a stash flushed by deliver or Recycle met a frame that
	// the allocator had free already; Run returns it after the round.
	stashErr error

	c     counters
	pub   mirror
	unpub int         // rounds that took packets since the last publish
	want  atomic.Bool // a Stats call asks Run to publish
	mu    sync.Mutex  // Reclaim against Run
}

var _ io.Closer = (*Poller)(nil)

// New returns a Poller over socks, which must all have an RX ring. The
// sockets stay the caller's: the Poller neither closes nor binds them, and
// they must not be read by anyone else while Run runs. Sockets may share
// UMEMs or not. A socket whose Fill ring serves other sockets too
// (xsk.Socket.SharesRings) or whose UMEM is unaligned is refused with
// ErrConfig.
func New(cfg *Config, socks ...*xsk.Socket) (*Poller, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := c.setDefaults(); err != nil {
		return nil, err
	}
	if len(socks) == 0 {
		return nil, ErrNoSockets
	}
	p := &Poller{cfg: c, copyMax: c.CopyThreshold}
	p.governor.configure(&p.cfg)
	if p.copyMax > 0 {
		p.copyBuf = make([]byte, p.copyMax)
	}
	pools := map[*umem.UMEM]*pool{}
	for i, s := range socks {
		if s == nil || s.RX() == nil {
			return nil, fmt.Errorf("%w: socket %d", ErrNoRX, i)
		}
		if s.UMEM().Unaligned() {
			return nil, fmt.Errorf("%w: socket %d has an unaligned UMEM (drive its rings directly)", ErrConfig, i)
		}
		if s.SharesRings() {
			return nil, fmt.Errorf("%w: socket %d shares its Fill ring with other sockets (xsk.NewShared: drive its rings directly)", ErrConfig, i)
		}
		if s.FD() < 0 {
			return nil, fmt.Errorf("rxpath: socket %d: %w", i, os.ErrClosed)
		}
		u := s.UMEM()
		pl := pools[u]
		if pl == nil {
			pl = newPool(u)
			pools[u] = pl
			p.pools = append(p.pools, pl)
		}
		pl.nsock++
		if s.TX() != nil {
			pl.sends = true
		}
		n := c.Weight + MaxSegments
		p.socks = append(p.socks, &sock{
			s: s, idx: i, rx: s.RX(), fill: s.Fill(), pool: pl,
			descs: make([]xsk.Desc, n),
			stash: make([]uint64, 0, n+c.FillBatch), base: ^uint64(u.FrameSize() - 1),
			tmp: make([]uint64, s.Fill().Size()),
		})
	}
	for _, s := range p.socks {
		s.target = s.fill.Size()
		if c.FillFrames > 0 {
			s.target = min(s.target, c.FillFrames)
		} else {
			share := int(s.pool.u.FrameCount())
			if s.pool.sends {
				share /= 2 // the rest for sending
			}
			s.target = min(s.target, max(share/s.pool.nsock, 1))
		}
	}
	if err := p.initWait(); err != nil {
		return nil, err
	}
	if !c.RuntimeSleep {
		p.pfds = make([]unix.PollFd, 0, len(p.socks))
	}
	p.ready = func(uintptr) bool {
		p.readyCalls++
		return p.stop.Load() || p.anyReady()
	}
	p.napped = func(uintptr) bool { return p.stop.Load() || p.napOver() }
	p.pkt.Segments = p.segs[:0]
	return p, nil
}

// Close releases the Poller's resources: its epoll descriptor, and the
// frames it lent to the kernel. It does not close the sockets. The frames
// come back to the UMEM allocator (as Reclaim gives them back) at once if
// every socket is closed already, and otherwise when the last of them
// closes, so that closing in the reverse order of creation (Poller, then
// sockets, then UMEM: plain defers) leaves every frame free. Close is
// idempotent; it fails with ErrRunning while Run runs.
func (p *Poller) Close() error {
	// Close holds running while it marks the Poller closed and closes its
	// descriptors, so that no Run starts in between (Run checks closed
	// after taking running) and uses their numbers after they were
	// closed and perhaps reused.
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed.Load() {
		return nil
	}
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	p.closed.Store(true)
	err := errors.Join(p.ep.Close(), p.tf.Close())
	p.running.Store(false)
	if p.socksOpen() {
		for _, s := range p.socks {
			s.s.OnClose(func() {
				if !p.socksOpen() {
					_, _ = p.Reclaim() // nothing to report to; a second call returns 0
				}
			})
		}
		return err
	}
	_, rerr := p.Reclaim()
	return errors.Join(err, rerr)
}

// socksOpen reports whether any of the Poller's sockets is open.
func (p *Poller) socksOpen() bool {
	for _, s := range p.socks {
		if s.s.FD() >= 0 {
			return true
		}
	}
	return false
}

// Run receives packets and hands them to h until ctx ends, then returns
// ctx.Err(). It returns early with the error of a failed wake-up system
// call. Only one Run may run at a time; it may be called again after it
// returned.
func (p *Poller) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler", ErrConfig)
	}
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	if p.closed.Load() {
		return fmt.Errorf("rxpath: run: %w", os.ErrClosed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.h = h
	p.stashErr = nil
	for _, s := range p.socks {
		s.recycles = false
	}
	p.copier, _ = h.(Copier)
	p.ender, _ = h.(RoundEnder)
	defer func() { p.h, p.copier, p.ender = nil, nil, nil }()

	sc := SleepCost()
	p.pub.sleepCost.Store(int64(sc))
	// The governor's state is relative to epoch: a new Run starts it
	// afresh (calmUntil from an earlier Run would otherwise hold off
	// polling for as long as that Run lasted).
	p.epoch = time.Now()
	p.governor.start(sc)
	p.governor.clockCost = cpuClockCost()
	p.governor.flowCost = 0
	if !p.cfg.RuntimeSleep {
		p.governor.flowCost = flowSleepCost()
	}
	p.threadIdle, p.yieldAt, p.flowRetry = false, 0, 0
	defer p.flowLeave()
	p.deadline, p.busy = time.Time{}, 0
	p.stop.Store(false)
	cancelled := make(chan struct{})
	stopCancel := context.AfterFunc(ctx, func() {
		defer close(cancelled)
		p.stop.Store(true)
		_ = p.ep.SetReadDeadline(aLongTimeAgo)
		_ = p.tf.SetReadDeadline(aLongTimeAgo)
	})
	defer func() {
		if !stopCancel() {
			<-cancelled
		}
		_ = p.ep.SetReadDeadline(time.Time{})
		_ = p.tf.SetReadDeadline(time.Time{})
		p.deadline = time.Time{}
		p.stop.Store(false)
	}()
	if p.cfg.Spin {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}

	err := p.loop()
	if err == nil && p.stashErr != nil {
		err = p.stashErr
	}
	for _, s := range p.socks {
		// Frames received but not yet refilled go back to the allocator.
		s.pool.unstash(s.stash)
		if _, perr := putEach(s.pool.u, s.stash); perr != nil && err == nil {
			err = fmt.Errorf("rxpath: %w", perr)
		}
		s.stash = s.stash[:0]
	}
	p.publish()
	if err != nil {
		return err
	}
	return ctx.Err()
}

func (p *Poller) loop() error {
	for _, s := range p.socks {
		if err := p.refill(s, true); err != nil {
			return err
		}
	}
	g := &p.governor
	idle := 0 // empty rounds in a row
	// The clock (a vDSO call, as dear as a round that finds the ring
	// empty) is read only where the governor needs it: at the start of
	// a round after a sleep, a nap or an empty round polled again (with
	// Config.Spin or a positive IdleRounds, every clockEvery'th), at an
	// arrival (a round that took packets after an empty one) and at the
	// first empty round after packets. Rounds that take packets back to
	// back do not read it: there, now is the last reading.
	now, readClock := time.Since(p.epoch), true
	g.lastEmpty = true // no arrival sample before the first packet
	for !p.stop.Load() {
		fresh := readClock
		if fresh {
			now = time.Since(p.epoch)
			g.roundStart(now)
		}
		readClock, g.spun = false, false
		got, full, err := p.round()
		if err != nil {
			return err
		}
		if p.ender != nil {
			p.ender.EndRound()
		}
		if p.stashErr != nil {
			return p.stashErr
		}
		if !fresh && g.wantsClock(got) {
			now = time.Since(p.epoch)
		}
		g.roundEnd(now, got)
		if got > 0 {
			if p.busy++; p.busy == disarmAfter {
				if err := p.arm(false); err != nil {
					return err
				}
			}
		}
		if full {
			continue
		}
		// Poll again at once after a round that took packets; after an
		// empty one, ask the governor.
		if got > 0 {
			idle = 0
			continue
		}
		idle++
		switch g.decide(now, idle) {
		case actNap:
			// Packets are flowing, sparser than a nap's cost: let
			// them gather on the ring for one nap, then take them in
			// one round.
			if err := p.nap(); err != nil {
				return err
			}
			idle, readClock = 0, true
			continue
		case actPoll:
			// The spin rule's limit is a time, often of a few rounds:
			// read the clock every round while it decides.
			readClock = g.adaptive() || idle%clockEvery == 0
			continue
		}
		idle, readClock = 0, true
		if p.cfg.Spin {
			// Never sleep, but do what a sleep would: notice a closed
			// socket, refill the Fill rings from frames given back
			// meanwhile (a round refills only sockets that took
			// packets), wake the kernel where it asks and, now and then,
			// look for an interface that went away.
			if err := p.spinMaintain(); err != nil {
				return err
			}
			continue
		}
		// The round came up short: give the kernel every frame, wake it
		// where it asks, and sleep until a socket is readable. A socket
		// closed under us (its rings then take nothing) ends the Run.
		for _, s := range p.socks {
			if s.s.Closed() {
				return s.closedErr()
			}
		}
		starved := false
		for _, s := range p.socks {
			if err := p.refill(s, true); err != nil {
				return err
			}
			starved = starved || s.starved
		}
		// Never sleep longer than closedWait: a socket closed while we
		// sleep leaves the epoll set without a word.
		wait := closedWait
		if starved {
			wait = starveWait
		}
		cpu0 := g.sleepBegin(now, starved, p.c.sleeps)
		woke, quiet, err := p.sleep(wait)
		if err != nil {
			return err
		}
		g.sleepEnd(woke, time.Since(p.epoch), cpu0)
		if quiet && !starved && !p.stop.Load() {
			// A quiet interval. A socket whose interface went away is
			// unbound and says so only in SO_ERROR (ENETDOWN): look.
			for _, s := range p.socks {
				p.c.syscalls++
				if err := s.s.Err(); err != nil {
					return fmt.Errorf("rxpath: %w", err)
				}
			}
		}
	}
	return nil
}

// nap sleeps for the nap's timer (Config.Coalesce or its default, cut to
// the delay budget, Config.MaxDelay), plus a wake-up, on a timerfd watched
// through the Go runtime's poller (also in the flow sleep: a ppoll's own
// timeout would be stretched by the thread's timer slack), so that
// packets gather on the RX rings meanwhile; the end of Run's context ends it early. The sockets are
// disarmed in the epoll set first (arm): armed, every packet that arrives
// during the nap would wake the runtime's poller thread for nothing (the
// runtime watches the epoll set), costing the nap's CPU and the sending
// CPU's time in the epoll callbacks. Every napSample'th nap
// is timed in CPU: the process's CPU clock around it.
func (p *Poller) nap() error {
	g := &p.governor
	start := time.Since(p.epoch)
	c0 := g.napBegin(start)
	if err := p.arm(false); err != nil {
		return err
	}
	if err := p.timerNap(); err != nil || p.stop.Load() {
		return err
	}
	g.napEnd(time.Since(p.epoch)-start, c0)
	return nil
}

// timerNap is the nap's wait on the timerfd through the runtime's poller.
// Run's end cuts it short: that says nothing of a nap's length or cost, so
// the timer is disarmed (none is left running after Run) and the caller
// returns.
func (p *Poller) timerNap() error {
	p.c.syscalls++
	if err := rawTimerfdSettime(p.tfd, &p.napSpec); err != nil {
		return fmt.Errorf("rxpath: nap: %w", os.NewSyscallError("timerfd_settime", err))
	}
	err := p.trc.Read(p.napped)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("rxpath: nap: %w", err)
	}
	if err != nil || p.stop.Load() {
		p.c.syscalls++
		var zero unix.ItimerSpec
		_ = rawTimerfdSettime(p.tfd, &zero)
	}
	return nil
}

// napOver reports whether the nap's timer expired, and clears it.
func (p *Poller) napOver() bool {
	p.c.syscalls++
	return rawReadTimer(p.tfd)
}

// processCPU is the process's CPU time (every thread), 0 if the clock
// cannot be read. A variable, so that a test can make the read fail.
var processCPU = func() time.Duration {
	return time.Duration(rawProcessCPU())
}

// cpuClockCost returns what a read of the process's CPU clock adds to a
// span timed by two of them: the least difference, over cpuClockPairs
// pairs of reads back to back, of the second read from the first. The
// read is a system call, and about one
// read's worth falls between the two readings of any span. Measured once
// per process, on first use (a Poller's first Run: cpuClockPairs pairs of
// system calls), and cached; 0 where the clock cannot be read, or where
// two reads back to back can return the same time (a coarse clock).
func cpuClockCost() time.Duration {
	clockCost.once.Do(func() {
		least := time.Duration(-1)
		for range cpuClockPairs {
			a, b := rawProcessCPU(), rawProcessCPU()
			if a == 0 || b == 0 {
				return
			}
			if d := time.Duration(b - a); least < 0 || d < least {
				least = d
			}
		}
		clockCost.d = max(least, 0)
	})
	return clockCost.d
}

const cpuClockPairs = 16

var clockCost struct {
	once sync.Once
	d    time.Duration
}

// clockEvery: with Config.Spin or a positive IdleRounds, every
// clockEvery'th empty round polled again reads the clock (see loop).
const clockEvery = 8

// spinRounds is how many empty rounds a spinning poller polls between
// maintenance passes (spinMaintain).
const spinRounds = 64

// spinMaintain is the idle pass of a spinning poller.
func (p *Poller) spinMaintain() error {
	for _, s := range p.socks {
		if s.s.Closed() {
			return s.closedErr()
		}
		if err := p.refill(s, true); err != nil {
			return err
		}
	}
	p.publish() // rounds without packets publish nothing
	if p.spinIdle++; p.spinIdle%spinErrCheck == 0 {
		for _, s := range p.socks {
			p.c.syscalls++
			if err := s.s.Err(); err != nil {
				return fmt.Errorf("rxpath: %w", err)
			}
		}
	}
	return nil
}

// spinErrCheck: a spinning poller reads SO_ERROR once every this many idle
// passes (each after spinRounds empty rounds: some milliseconds apart).
const spinErrCheck = 1024

// round is one poll: see the package
// documentation. It reports whether the round ended on its budget or time
// rather than coming up short. A round publishes the counters only when
// asked or every publishEvery rounds (see published): an empty round
// costs a few loads and no stores another CPU sees.
func (p *Poller) round() (got int, full bool, err error) {
	p.c.rounds++
	if p.cfg.BusyPoll {
		for _, s := range p.socks {
			p.c.syscalls++
			if err := s.s.WakeRX(); err != nil {
				return 0, false, fmt.Errorf("rxpath: busy poll: %w", err)
			}
		}
	}
	left := p.cfg.Budget
	ns := len(p.socks)
	// RoundTime counts from the end of the first visit after which the
	// round goes on: a round of one short visit reads no clock.
	start := time.Duration(-1)
	i := p.next
	for quiet := 0; quiet < ns; {
		s := p.socks[i]
		q := min(p.cfg.Weight, left)
		n := p.visit(s, q)
		if i++; i == ns {
			i = 0
		}
		if n < q {
			quiet++
		} else {
			quiet = 0
		}
		if n == 0 {
			continue
		}
		left -= n
		if err := p.refill(s, false); err != nil {
			return 0, false, err
		}
		if left == 0 {
			full = true
			p.c.fullRounds++
			break
		}
		if p.cfg.RoundTime > 0 && quiet < ns {
			t := time.Since(p.epoch)
			if start < 0 {
				start = t
			} else if t-start > p.cfg.RoundTime {
				full = true
				p.c.timeRounds++
				break
			}
		}
	}
	p.next = i
	got = p.cfg.Budget - left
	p.c.hist[min(bits.Len(uint(got)), HistogramBuckets-1)]++
	p.c.maxRound = max(p.c.maxRound, uint64(got))
	p.published(got)
	return got, full, nil
}

// visit takes up to quota packets from s and hands them to the handler.
func (p *Poller) visit(s *sock, quota int) int {
	s.c.visits++
	pk := 0
	pl := s.pool
	short := false // the RX ring had fewer than asked: do not ask again this visit
	for pk < quota {
		if s.off == s.np {
			if short {
				break
			}
			s.off, s.np = 0, 0
			want := quota - pk
			got := s.rx.Consume(s.descs[:want])
			if got == 0 {
				break
			}
			s.out -= got
			s.np, short = got, got < want
			if p.cfg.Prefetch {
				p.touched += touchFirst(pl.mem, s.descs[:got])
			}
		}
		// A packet in one buffer inside the UMEM, the common case, is
		// told here; SplitPacket says what the others are.
		n, v := 1, Whole
		if d := s.descs[s.off]; d.Options&xsk.OptContd != 0 || !inBounds(d, pl.size, uint64(pl.fsize)-1) {
			n, v = SplitPacket(s.descs[s.off:s.np], pl.size, pl.fsize)
		}
		if v == Partial {
			// The rest of the packet is on the ring (the kernel publishes
			// a packet's buffers together) or on its way: read it behind
			// the part we have (not read ahead with Config.Prefetch).
			m := copy(s.descs, s.descs[s.off:s.np])
			s.off, s.np = 0, m
			got := s.rx.Consume(s.descs[m:])
			if got == 0 {
				break
			}
			s.out -= got
			s.np += got
			continue
		}
		chain := s.descs[s.off : s.off+n]
		s.off += n
		s.c.frames += uint64(n)
		pk++
		if s.discard || v != Whole {
			// The tail of a chain that was too long, or a packet with a
			// descriptor outside the UMEM.
			s.discard = v == TooLong
			p.drop(s, chain)
			continue
		}
		p.deliver(s, chain)
	}
	s.c.packets += uint64(pk)
	s.c.maxVisit = max(s.c.maxVisit, uint64(pk))
	return pk
}

// touchFirst reads one byte of every cache line that holds the first
// prefetchBytes of a packet's first buffer (or all of a shorter one),
// for every packet of descs whose first buffer starts inside mem
// (Config.Prefetch), and returns their sum, which the caller keeps so
// that the reads are not optimised away. The buffers that continue a
// packet (after a descriptor with xsk.OptContd) hold its payload, not
// its headers, and are not read; descs starts at a packet's first
// buffer but after the tail of a packet too long to take (visit reads
// the rest of a packet the last batch ended in the middle of without
// calling it). The reads are independent of each
// other: the CPU overlaps their cache misses.
func touchFirst(mem []byte, descs []xsk.Desc) byte {
	var t byte
	contd := false // the previous descriptor's packet goes on in this one
	for _, d := range descs {
		if !contd {
			end := min(d.Addr+uint64(min(d.Len, prefetchBytes)), uint64(len(mem)))
			for a := d.Addr; a < end; a = a | (cacheLine - 1) + 1 {
				t += mem[a]
			}
		}
		contd = d.Options&xsk.OptContd != 0
	}
	return t
}

// prefetchBytes: Config.Prefetch reads ahead the lines of a packet's
// first 128 bytes, its headers: Ethernet, IPv6 and TCP with options
// reach past one 64-byte line, and so does a payload's first bytes
// behind UDP over IPv4 (42 bytes of headers). cacheLine is x86-64's and
// most arm64 cores' line size.
const (
	prefetchBytes = 128
	cacheLine     = 64
)

// recycle queues a frame of s's UMEM for its Fill ring. A full stash is
// flushed first; its error (a frame given back twice) is kept in
// p.stashErr, which ends Run after the round.
func (p *Poller) recycle(s *sock, addr uint64) {
	if len(s.stash) == cap(s.stash) {
		if err := p.flushStash(s); err != nil && p.stashErr == nil {
			p.stashErr = err
		}
	}
	a := addr & s.base
	i := s.pool.frame(a)
	s.pool.stashed[i>>6] |= 1 << (i & 63)
	s.stash = append(s.stash, a)
}

// drop counts and discards a packet; the frames it names that the poller
// lent are recycled, the others counted invalid and left alone.
func (p *Poller) drop(s *sock, chain []xsk.Desc) {
	p.c.dropped++
	for _, d := range chain {
		if d.Addr < s.pool.size && s.pool.take(d.Addr) {
			p.recycle(s, d.Addr)
		} else {
			p.c.invalid++
		}
	}
}

// deliver hands one valid packet to the handler: copied or lent.
func (p *Poller) deliver(s *sock, chain []xsk.Desc) {
	pl := s.pool
	for i, d := range chain {
		if !pl.take(d.Addr) {
			// A frame the kernel does not have from us, or one the chain
			// names twice: a forged or duplicated descriptor. Drop the
			// packet, keep the frames (each once).
			for _, e := range chain[:i] {
				pl.give(e.Addr)
			}
			p.drop(s, chain)
			return
		}
	}
	pk := &p.pkt
	pk.Socket, pk.Index = s.s, s.idx
	pk.copied, pk.kept = false, false
	pk.front = pl.mem[chain[0].Addr&s.base : chain[0].Addr] // packet.go: Front
	if p.cfg.Metadata {
		pk.meta.read(pl.mem, chain[0].Addr) // meta.go
	}
	if len(chain) == 1 {
		d := chain[0]
		data := pl.mem[d.Addr : d.Addr+uint64(d.Len)]
		if int(d.Len) <= p.copyMax {
			buf := p.copyBuf
			if p.copier != nil {
				buf = p.copier.CopyBuffer(int(d.Len))
			}
			if cap(buf) >= len(data) {
				buf = buf[:len(data)]
				copy(buf, data)
				p.recycle(s, d.Addr)
				pk.copied = true
				pk.Data, pk.Len, pk.descs = buf, len(buf), nil
				pk.Segments = append(p.segs[:0], buf)
				p.c.copied++
				p.c.bytes += uint64(len(buf))
				p.h.Receive(pk)
				pk.Data, pk.Segments, pk.front = nil, nil, nil
				return
			}
		}
		pk.Data, pk.Len = data, len(data)
		pk.Segments = append(p.segs[:0], data)
	} else {
		total := 0
		segs := p.segs[:0]
		for _, d := range chain {
			seg := pl.mem[d.Addr : d.Addr+uint64(d.Len)]
			segs = append(segs, seg)
			total += len(seg)
		}
		pk.Data, pk.Segments, pk.Len = segs[0], segs, total
		p.c.chains++
	}
	pk.descs = chain
	p.c.lent++
	p.c.bytes += uint64(pk.Len)
	p.h.Receive(pk)
	if pk.kept {
		p.c.kept++
	} else {
		for _, d := range chain {
			p.recycle(s, d.Addr)
		}
	}
	pk.Data, pk.Segments, pk.descs, pk.front = nil, nil, nil, nil
}

// produce puts frames on s's Fill ring and marks them lent; it returns how
// many the ring took.
func (p *Poller) produce(s *sock, addrs []uint64) int {
	n := s.fill.Produce(addrs)
	for _, a := range addrs[:n] {
		s.pool.give(a)
	}
	s.out += n
	return n
}

// flushStash gives the stash to the Fill ring, up to its target, and the
// rest to the allocator, frame by frame: a frame the allocator has free
// already (given to Recycle twice, or while free) is refused and
// reported, the others are given back. Only a full stash is flushed (a
// Recycle of many frames, or visits whose refills waited for a batch), so
// reading the ring's consumer index here is rare.
func (p *Poller) flushStash(s *sock) error {
	room := max(s.target-s.fill.Len(), 0)
	n := p.produce(s, s.stash[:min(room, len(s.stash))])
	s.pool.unstash(s.stash[n:])
	_, err := putEach(s.pool.u, s.stash[n:])
	s.stash = s.stash[:0]
	if err != nil {
		return fmt.Errorf("rxpath: %w", err)
	}
	return nil
}

// putEach gives addrs to u's allocator one at a time, so that a bad one
// does not keep the rest back (umem.UMEM.PutBatch stops at it); it
// returns how many u took and the errors of the others.
func putEach(u *umem.UMEM, addrs []uint64) (int, error) {
	n := 0
	var errs []error
	for _, a := range addrs {
		if err := u.Put(a); err != nil {
			errs = append(errs, err)
		} else {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// refill tops s's Fill ring up to its target: from the stash first, then
// from the allocator; what the ring does not take of the stash goes to
// the allocator. Unless force, it waits until a batch is worth it. It
// wakes the kernel when the ring asks for it.
func (p *Poller) refill(s *sock, force bool) error {
	if !force && s.target-s.out < p.cfg.FillBatch && s.unread < refillCheck {
		s.unread++
		return nil
	}
	s.unread = 0
	have := s.fill.Len()
	if have == 0 {
		p.c.fillEmpty++
	}
	want := s.target - have
	if want < p.cfg.FillBatch && have > 0 && !force {
		return nil
	}
	s.starved = false
	if want > 0 {
		n := p.produce(s, s.stash[:min(want, len(s.stash))])
		want -= n
		s.stash = append(s.stash[:0], s.stash[n:]...)
		// A socket whose frames come back through Recycle waits for
		// them while its ring holds half its target, and a forced
		// refill takes only the frames that the kernel (s.out, the RX
		// ring's included) and the stash do not account for: the
		// allocator's frames would join the circle out of order.
		if want > 0 && s.recycles && have+n > 0 {
			if force {
				want = min(want, s.target-s.out-len(s.stash))
			} else if 2*(have+n) >= s.target {
				want = 0
			}
		}
		if want > 0 {
			got := s.pool.u.GetBatch(s.tmp[:min(want, len(s.tmp))])
			if k := p.produce(s, s.tmp[:got]); k < got {
				if err := s.pool.u.PutBatch(s.tmp[k:got]); err != nil {
					return fmt.Errorf("rxpath: %w", err)
				}
			}
			if got == 0 && have == 0 && n == 0 {
				s.starved = true
				p.c.fillStarved++
			}
		}
	}
	if len(s.stash) > 0 {
		// What the ring did not take goes to the allocator, so that no
		// more frames than the target circulate.
		s.pool.unstash(s.stash)
		_, err := putEach(s.pool.u, s.stash)
		s.stash = s.stash[:0] // given back, or refused: never twice
		if err != nil {
			return fmt.Errorf("rxpath: %w", err)
		}
	}
	if s.fill.NeedWakeup() {
		p.c.syscalls++
		if err := s.s.WakeRX(); err != nil {
			return fmt.Errorf("rxpath: wake RX: %w", err)
		}
	}
	return nil
}

// refillCheck is how many refills in a row may skip reading the Fill
// ring on the strength of sock.out.
const refillCheck = 8

// anyReady reports whether a socket has descriptors to handle.
func (p *Poller) anyReady() bool {
	for _, s := range p.socks {
		if s.rx.Len() > 0 {
			return true
		}
		if s.off < s.np {
			// Descriptors read and not handled: ready unless all that is
			// left is the start of a chain whose end has not arrived.
			if _, v := SplitPacket(s.descs[s.off:s.np], s.pool.size, s.pool.fsize); v != Partial {
				return true
			}
		}
	}
	return false
}

// Reclaim gives back to the UMEM allocator every frame the poller lent to
// the kernel and did not get back (on Fill rings, on RX rings unread),
// every descriptor it read but did not deliver, and every frame it holds
// for a Fill ring. The kernel may write
// frames until their socket is closed, so Reclaim fails with ErrOpen while
// any of the Poller's sockets is open, and with ErrRunning during Run. It
// returns how many frames it gave back; a second call returns 0. Close
// calls it, so there is no need to unless the frames are wanted back
// before Close.
func (p *Poller) Reclaim() (int, error) {
	// Once closed (which Close sets while it holds running), no Run gets
	// past its closed check, and running may only be a concurrent Close
	// or a Run on its way out: Reclaim touches neither's descriptors and
	// takes mu, which Run holds while it runs.
	if !p.closed.Load() && p.running.Load() {
		return 0, ErrRunning
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.socks {
		if s.s.FD() >= 0 {
			return 0, fmt.Errorf("%w: %s queue %d", ErrOpen, s.s.Ifname(), s.s.Queue())
		}
	}
	total := 0
	var errs []error
	for _, s := range p.socks {
		// Received and not yet refilled (Run gives these back as it
		// returns).
		s.pool.unstash(s.stash)
		n, err := putEach(s.pool.u, s.stash)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
		s.stash = s.stash[:0]
		// Read but not handled: the lent bit is set for ours.
		for _, d := range s.descs[s.off:s.np] {
			if d.Addr < s.pool.size && s.pool.take(d.Addr) {
				if err := s.pool.u.Put(d.Addr); err != nil {
					errs = append(errs, err)
				} else {
					total++
				}
			}
		}
		s.off, s.np, s.out = 0, 0, 0
	}
	for _, pl := range p.pools {
		var addrs [64]uint64
		for w, word := range pl.lent {
			n := 0
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				addrs[n] = uint64(w*64+b) << pl.shift
				n++
			}
			pl.lent[w] = 0
			if n == 0 {
				continue
			}
			pl.u.Moved(umem.Fill, umem.Held, n)
			if err := pl.u.PutBatch(addrs[:n]); err != nil {
				errs = append(errs, err)
			}
			total += n
		}
	}
	if len(errs) > 0 {
		return total, fmt.Errorf("rxpath: reclaim: %w", errors.Join(errs...))
	}
	return total, nil
}
