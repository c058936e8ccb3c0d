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
	lent  []uint64
	nsock int
	sends bool // a socket of the poller on this UMEM has a TX ring
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

func (pl *pool) give(addr uint64) {
	i := pl.frame(addr)
	pl.lent[i>>6] |= 1 << (i & 63)
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
	pfds   []unix.PollFd // Config.Thread: the sleep's ppoll set
	// Config.Thread: the last ppoll timed out, so sleeps go through the
	// runtime's poller until a socket wakes one (see thread.go).
	threadIdle bool
	yieldAt    time.Duration // Config.Thread: when the goroutine last yielded (since epoch)

	closeMu  sync.Mutex // serialises Close
	running  atomic.Bool
	stop     atomic.Bool
	closed   atomic.Bool
	next     int    // socket that starts the next round
	spinIdle uint64 // idle passes of a spinning poller

	// The idle rule (Config.IdleRounds 0): see keepPolling.
	epoch     time.Time       // Run's start: round times are offsets from it
	lastPkt   time.Duration   // when the last round that took packets began
	gap       time.Duration   // expected wait for the next packet (moving average)
	dev       time.Duration   // its mean deviation (moving average)
	prevRound time.Duration   // when the previous round began
	spun      bool            // the previous round was an empty one polled again
	calmUntil time.Duration   // the poller does not poll an empty ring again before this
	lastEmpty bool            // the previous round took nothing (or was a sleep)
	wokeAt    time.Duration   // when the last sleep ended, if the round after it is next
	nappedAt  time.Duration   // when the last nap began, if the round after it is next
	napLen    time.Duration   // how long a nap lasts (moving average; Config.Coalesce at first)
	napCost   time.Duration   // the CPU time of a nap (moving average of samples; 0: none yet)
	napHit    int             // how often a nap finds packets, of napOne (moving average)
	napProbe  int             // naps forgone for their cost (see napNow)
	napSpec   unix.ItimerSpec // Config.Coalesce, for the timerfd
	// The rest rule (see restCost): the CPU and the packets of sampled
	// cycles from one rest (a nap or a sleep) to the next, by how the
	// cycle began, as decaying sums; and the cycle being sampled.
	rest      [restKinds]restCost
	restKind  int               // the sampled cycle's kind, restNone if none is
	restCPU0  time.Duration     // the process's CPU time at its start
	restPkts  int64             // packets taken since its start
	restsOf   [restKinds]uint64 // rests begun, by kind
	restProbe int               // naps forgone for their cost per packet (see napPays)
	restForce bool              // sample the next rest (a probe nap)
	sleepCost time.Duration     // SleepCost(), read at Run's start
	// The spin rule (see spin.go): the idle periods seen, the limit they
	// gave, and the CPU time of a sleep (the least of the last
	// len(sleepCPUs) samples; 0: none yet). sleptAt is the start of the
	// round before the last sleep; blocked whether that sleep waited
	// (readyCalls counts the ready checks of a runtime sleep), yielded
	// whether it ran other goroutines first (Config.Thread); idleStarved
	// whether a sleep an empty Fill ring forced came since the last
	// packet.
	spin        spinHist
	spinLimit   time.Duration
	sleepCPU    time.Duration
	sleepCPUs   [sleepKeep]time.Duration
	sleepTimed  uint64
	sleptAt     time.Duration
	blocked     bool
	yielded     bool
	readyCalls  int
	idleStarved bool
	deadline    time.Time // the epoll file's read deadline, zero if none
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
			pl = &pool{u: u, mem: u.Bytes(), size: u.Size(), fsize: u.FrameSize(),
				shift: uint(bits.TrailingZeros32(u.FrameSize())),
				lent:  make([]uint64, (u.FrameCount()+63)/64)}
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
	if c.Thread {
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
	p.copier, _ = h.(Copier)
	p.ender, _ = h.(RoundEnder)
	defer func() { p.h, p.copier, p.ender = nil, nil, nil }()

	p.sleepCost = SleepCost()
	p.pub.sleepCost.Store(int64(p.sleepCost))
	// The idle rule's state is relative to epoch: a new Run starts it
	// afresh (calmUntil from an earlier Run would otherwise hold off
	// polling for as long as that Run lasted).
	p.epoch, p.lastPkt = time.Now(), 0
	p.gap, p.dev, p.prevRound, p.spun, p.calmUntil, p.lastEmpty, p.wokeAt, p.sleptAt = 0, 0, 0, false, 0, false, 0, 0
	p.nappedAt, p.napHit = 0, napOne
	p.threadIdle, p.yieldAt = false, 0
	p.restKind = restNone // the rest costs are kept across Runs, not a cycle begun in one
	nap := p.cfg.Coalesce
	if nap == 0 {
		nap = napFactor * p.sleepCost
	}
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(max(nap, 0)))}
	if p.napLen == 0 || p.napLen > p.napOverrunAt() {
		// Measured from the first nap on and kept across Runs, but not
		// an overrun from an earlier Run's contended CPU: this Run's
		// timer comes from a fresh SleepCost.
		p.napLen = nap
	}
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
	for _, s := range p.socks {
		// Frames received but not yet refilled go back to the allocator.
		if len(s.stash) > 0 {
			if perr := s.pool.u.PutBatch(s.stash); perr != nil && err == nil {
				err = fmt.Errorf("rxpath: %w", perr)
			}
			s.stash = s.stash[:0]
		}
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
	idle := 0 // empty rounds in a row
	// The clock (a vDSO call, as dear as a round that finds the ring
	// empty) is read only where the idle rule needs it: at the start of
	// a round after a sleep, a nap or an empty round polled again (with
	// Config.Spin or a positive IdleRounds, every clockEvery'th), at an
	// arrival (a round that took packets after an empty one) and at the
	// first empty round after packets. Rounds that take packets back to
	// back do not read it: there, now is the last reading.
	now, readClock := time.Since(p.epoch), true
	p.lastEmpty = true // no arrival sample before the first packet
	for !p.stop.Load() {
		fresh := readClock
		if fresh {
			now = time.Since(p.epoch)
			if p.spun && now-p.prevRound > preemptedAfter*p.sleepCost {
				// Descheduled while polling an empty ring: another task
				// wants this CPU. Polling then only lowers the poller's
				// claim on it (the scheduler favours a task that slept),
				// so sleep at once for a while.
				p.c.preempted++
				p.calmUntil = now + calmFor*p.sleepCost
			}
			p.prevRound = now
		}
		readClock, p.spun = false, false
		got, full, err := p.round()
		if err != nil {
			return err
		}
		if p.ender != nil {
			p.ender.EndRound()
		}
		p.restPkts += int64(got)
		switch {
		case got > 0 && p.lastEmpty:
			if !fresh {
				now = time.Since(p.epoch)
			}
			p.arrived(now)
		case got == 0 && !p.lastEmpty:
			// The packets of the round before were the last so far.
			if !fresh {
				now = time.Since(p.epoch)
			}
			p.prevRound, p.lastPkt = now, now
		}
		if p.nappedAt > 0 {
			hit := 0
			if got > 0 {
				hit = napOne
			} else {
				p.c.napsEmpty++
			}
			p.napHit += (hit - p.napHit) / 4
		}
		p.lastEmpty, p.wokeAt, p.nappedAt = got == 0, 0, 0
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
		// empty one, poll again while it pays (keepPolling), else sleep.
		if got > 0 {
			idle = 0
			continue
		}
		idle++
		if p.napNow(now, idle) {
			// Packets are flowing, sparser than a nap's cost: let
			// them gather on the ring for one nap, then take them in
			// one round.
			if err := p.nap(p.rested(restNap)); err != nil {
				return err
			}
			idle, readClock = 0, true
			continue
		}
		if p.keepPolling(now, idle) {
			p.c.spins++
			// The spin rule's limit is a time, often of a few rounds:
			// read the clock every round while it decides.
			p.spun = true
			readClock = p.adaptive() || idle%clockEvery == 0
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
		var cpu0 time.Duration // the process's CPU time, to time this sleep
		if starved {
			wait = starveWait
			// Forced by an empty Fill ring, not chosen against a nap:
			// it ends a sampled cycle but begins none, nor is it timed,
			// nor is the idle period it falls in counted.
			p.endSample()
			p.idleStarved = true
		} else {
			cpu0 = p.rested(restSleep)
			if !p.timeSleep() {
				cpu0 = 0
			} else if cpu0 == 0 {
				p.c.syscalls++
				cpu0 = processCPU()
			}
		}
		p.sleptAt = now
		woke, quiet, err := p.sleep(wait)
		if err != nil {
			return err
		}
		if woke {
			p.wokeAt = time.Since(p.epoch)
			if cpu0 > 0 {
				// A sleep that a socket ended: what it cost against
				// polling.
				p.c.syscalls++
				p.sleptFor(processCPU()-cpu0, p.wokeAt-p.sleptAt)
			}
		}
		if !woke && p.restKind == restSleep {
			// No socket ended it (its timeout, a signal, Run's end):
			// an idle interval says nothing of what waiting for
			// packets costs.
			p.restKind = restNone
		}
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

// arrived updates the expected wait for the next packet after a round,
// begun at now, that took packets: moving averages (weight 1/4) of
// the time from one arrival to the next and of its deviation from that
// average (as TCP estimates a round-trip time and its variation). Only a
// round that follows an empty one or a sleep sees an arrival: a round
// after one that took packets is the same batch, and a round after a nap
// does not say when in the nap its packets came. After a spin, the
// arrival was now; after a sleep, one wake-up (SleepCost) before the
// wake. A sample counts for at most twice the longer of a sleep's wake-up
// and a nap: one pause between bursts does not make the poller sleep
// through the next burst, a stream slower than that still does. A sleep
// that a packet ended within a quarter of a nap counts, at half the
// weight of a nap, as a nap that would have found one (napHit); one that
// did not block (the packet came as it began) puts the arrival at the
// wake. With Config.IdleRounds 0 (and not Spin), the idle period that
// ended is counted for the spin rule (see idleEnded), unless an empty
// Fill ring forced a sleep in it.
func (p *Poller) arrived(now time.Duration) {
	if p.lastPkt > 0 && p.lastEmpty && p.nappedAt == 0 {
		at := now
		if p.wokeAt > 0 {
			at = p.wokeAt // a sleep that did not block: the packet was there
			if p.blocked {
				at = max(p.wokeAt-p.sleepCost, p.lastPkt)
			}
		}
		if !p.idleStarved && p.adaptive() {
			p.idleEnded(at)
		}
		sample := min(at-p.lastPkt, 2*max(p.sleepCost, p.napLen))
		d := sample - p.gap
		p.gap += d / 4
		p.dev += (max(d, -d) - p.dev) / 4
		if p.wokeAt > 0 && sample < p.napLen/4 {
			// A nap would have found this packet.
			p.napHit += (napOne - p.napHit) / 8
		}
	}
	p.lastPkt, p.idleStarved = now, false
}

// napNow decides, after an empty round begun at now, whether to nap:
// with Config.IdleRounds 0 and Config.Coalesce not negative, while
// packets flow (the expected gap to the next arrival plus its mean
// deviation, and the silence since the last packet, shorter than a nap
// lasts), at least half the
// recent naps found packets (napHit), naps end on time (NapTime within
// napOverrun times the timer), and a nap costs less CPU than it
// lasts (NapCost < NapTime, both measured while running), and a cycle
// begun with a nap costs less CPU per packet than one begun with a sleep
// (napPays, decided at the first empty round, idle 1, of a stretch; with
// an explicit Config.Coalesce neither cost is weighed).
// Then a nap is cheaper per packet than polling through the gaps (which
// costs the gap itself in CPU: a nap of length T costs NapCost for the
// T/gap packets it gathers) and than sleeping until the next packet
// (whose wake-up the sending CPU pays for, and which gathers only the
// packets of one wake-up's latency).
func (p *Poller) napNow(now time.Duration, idle int) bool {
	if !p.adaptive() || p.cfg.Coalesce < 0 {
		return false
	}
	quiet := now - p.lastPkt
	if p.gap+p.dev >= p.napLen || quiet >= p.napLen || p.napHit < napOne/2 {
		return false
	}
	if p.napLen > p.napOverrunAt() {
		// Naps end far later than their timer (NapTime): the CPU is
		// contended (on veth, by the softirq work of this very
		// traffic, ksoftirqd), and a nap that wakes late leaves the
		// RX ring unattended with its sockets out of the epoll set.
		// Measure again now and then.
		p.napProbe++
		return p.napProbe%napProbeEvery == 0
	}
	if p.cfg.Coalesce > 0 {
		// An explicit Coalesce naps whatever a nap costs: the cost is
		// measured on the process's CPU clock, which also counts other
		// threads (other pollers in the process, a TX loop) and can
		// look as long as the nap itself where they are busy.
		return true
	}
	if p.napCost < p.napLen {
		return p.napPays(idle == 1)
	}
	// Naps cost what they last: measure again now and then.
	p.napProbe++
	return p.napProbe%napProbeEvery == 0
}

// napPays reports whether, by the rest costs (see restCost), a cycle
// begun with a nap costs less CPU per packet than one begun with a sleep,
// or either has no samples yet. A sleep's wake-up gathers the packets of
// one wake-up's latency where the kernel wakes the poller for each
// packet, but a whole batch where it defers its wake-ups (NAPI deferral:
// napi_defer_hard_irqs, gro_flush_timeout): a nap on top of that buys
// nothing and costs a timer's wake-up and a round more. A nap that does
// not pay is forgone once per stretch of empty rounds, at its first
// (first): the empty rounds polled again after it are the sleep's way of
// waiting, and count neither as naps forgone nor towards a probe. One
// nap forgone in napProbeEvery is taken all the same, and sampled, to
// measure again. Sleeps need no probe: a napping poller still sleeps
// when the packets pause.
func (p *Poller) napPays(first bool) bool {
	n, s := &p.rest[restNap], &p.rest[restSleep]
	if !n.measured() || !s.measured() || n.perPacket() < s.perPacket() {
		return true
	}
	if !first {
		return false
	}
	if p.restProbe++; p.restProbe%napProbeEvery == 0 {
		p.restForce = true
		return true
	}
	p.c.napsForgone++
	if p.restKind == restNap {
		// A nap's cycle ends where the next nap would begin: what
		// follows a nap forgone is the sleep's way of waiting.
		p.endSample()
	}
	return false
}

// Kinds of rest, and of the cycle from one rest to the next; restNone,
// the zero value, is no cycle (index 0 of the arrays by kind is unused).
const (
	restNone  = iota
	restNap   // a nap (see nap)
	restSleep // a sleep until a socket is readable (see sleep)
	restKinds
)

// restCost is the CPU time (ns) and the packets of sampled cycles of one
// kind, each from a rest to the next rest (for a nap, or to the next nap
// forgone): the rest, its wake-up and the rounds after it, polled-again
// empty rounds included. Each sample decays both sums by 1/restDecay
// first, so their ratio is a moving average weighted by packets.
type restCost struct{ cpu, pkts float64 }

// measured reports whether c has samples that carried packets.
func (c *restCost) measured() bool { return c.pkts > 0 && c.cpu > 0 }

// perPacket is the cost per packet, 0 if not measured.
func (c *restCost) perPacket() time.Duration {
	if !c.measured() {
		return 0
	}
	return time.Duration(c.cpu / c.pkts)
}

// add counts a sampled cycle.
func (c *restCost) add(cpu time.Duration, pkts int64) {
	c.cpu += float64(cpu) - c.cpu/restDecay
	c.pkts += float64(pkts) - c.pkts/restDecay
}

// restDecay: see restCost. restSample: every restSample'th rest of each
// kind, a probe nap and every rest of a kind not yet measured begin a
// sampled cycle (not a sleep forced by an empty Fill ring); a sample
// reads the process's CPU clock (a system call) at each end, and one
// begun with a sleep that no socket ended, or with a nap cut short, is
// dropped.
const (
	restDecay  = 8
	restSample = 4
)

// rested is called as the poller begins a rest of kind: it ends the
// sampled cycle, if one is open, and begins one (see restSample). Where
// the rule does not decide (Config.Spin, a non-zero IdleRounds, a
// non-zero Coalesce), it samples nothing. It returns the process's CPU
// time if it read it (to end a cycle or begin one), else 0.
func (p *Poller) rested(kind int) (cpu time.Duration) {
	if !p.adaptive() || p.cfg.Coalesce != 0 {
		return 0
	}
	now, read := p.endSample()
	sample := p.restsOf[kind]%restSample == 0 || p.restForce || !p.rest[kind].measured()
	p.restsOf[kind]++
	p.restForce = false
	if !sample {
		return now
	}
	if !read {
		p.c.syscalls++
		now = processCPU()
	}
	if now > 0 { // 0: the clock could not be read
		p.restKind, p.restCPU0, p.restPkts = kind, now, 0
	}
	return now
}

// endSample ends the sampled cycle, if one is open, and returns the
// process's CPU time it read to do so. A reading that failed (0) or went
// back drops the sample.
func (p *Poller) endSample() (now time.Duration, read bool) {
	k := p.restKind
	if k == restNone {
		return 0, false
	}
	p.restKind = restNone
	p.c.syscalls++
	now = processCPU()
	if now <= p.restCPU0 {
		return now, now > 0
	}
	p.rest[k].add(now-p.restCPU0, p.restPkts)
	return now, true
}

// napOverrun: naps that last (NapTime, a moving average) more than
// napOverrun times their timer, plus two wake-ups (SleepCost), are not
// taken, but to measure again: on a contended CPU a nap can last many
// times its timer, and the RX ring overflows meanwhile (make bench's
// l3fwd 1500 B row shows it as loss; xdpkitbench --coalesce=-1ns turns
// naps off to compare).
const napOverrun = 4

// napOverrunAt is the NapTime beyond which naps overrun (see napOverrun).
func (p *Poller) napOverrunAt() time.Duration {
	return napOverrun*time.Duration(p.napSpec.Value.Nano()) + 2*p.sleepCost
}

// napProbeEvery: while naps are found to cost what they last, one in
// napProbeEvery times one would otherwise be taken, it is, to measure
// again.
const napProbeEvery = 64

// napOne is a napHit of 1: every nap finds packets.
const napOne = 1 << 10

// nap sleeps for Config.Coalesce (plus a wake-up) on a timerfd watched
// through the Go runtime's poller (with Config.Thread and a nap of at most
// threadWait: in ppoll on the Poller's thread), so that packets gather on
// the RX rings meanwhile; the end of Run's context ends it early. The sockets are
// disarmed in the epoll set first (arm): armed, every packet that arrives
// during the nap would wake the runtime's poller thread for nothing (the
// runtime watches the epoll set), costing the nap's CPU and the sending
// CPU's time in the epoll callbacks. Every napSample'th nap
// is timed in CPU: the process's CPU clock around it, from cpu where the
// caller has just read it (rested's reading; 0: read here).
func (p *Poller) nap(cpu time.Duration) error {
	start := time.Since(p.epoch)
	p.nappedAt = start
	sample := p.c.naps%napSample == 0 || p.napCost >= p.napLen
	c0 := cpu
	if sample && c0 == 0 {
		p.c.syscalls++
		c0 = processCPU()
	}
	sample = sample && c0 > 0 // 0: the clock could not be read
	if err := p.arm(false); err != nil {
		return err
	}
	if d := time.Duration(p.napSpec.Value.Nano()); p.cfg.Thread && d <= threadWait {
		if !p.threadNap(d) {
			p.nappedAt = 0 // cut short: the round after it is no nap's
			if p.restKind == restNap {
				p.restKind = restNone // nor is its cycle
			}
			return nil
		}
	} else if err := p.timerNap(); err != nil || p.stop.Load() {
		return err
	}
	d := time.Since(p.epoch) - start
	if sample {
		p.c.syscalls++
		if c1 := processCPU(); c1 > c0 {
			p.napCost = lowMean(p.napCost, c1-c0)
		}
	}
	if p.c.naps == 0 {
		p.napLen = d
	}
	p.c.naps++
	p.napLen += (d - p.napLen) / 8
	return nil
}

// lowMean moves est, a moving average biased low, towards the sample c:
// a sample below it (or the first) is taken as it is, one above it moves
// it by a sixteenth (NapCost: the process's CPU clock, which its samples
// read, also counts what other threads did meanwhile).
func lowMean(est, c time.Duration) time.Duration {
	if est == 0 || c < est {
		return c
	}
	return est + (c-est)/16
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

// napFactor: by default a nap lasts napFactor SleepCosts, so that its
// CPU cost (about a SleepCost where a short sleep costs what it lasts)
// is a small part of its length.
const napFactor = 4

// napSample: every napSample'th nap measures its CPU cost.
const napSample = 16

// processCPU is the process's CPU time (every thread), 0 if the clock
// cannot be read. A variable, so that a test can make the read fail.
var processCPU = func() time.Duration {
	return time.Duration(rawProcessCPU())
}

// adaptive reports whether the poller decides how to wait from
// measurement (Config.IdleRounds 0, not Spin): only then does it nap, time
// its rests and sleeps, and keep the spin rule's state.
func (p *Poller) adaptive() bool { return p.cfg.IdleRounds == 0 && !p.cfg.Spin }

// keepPolling decides, after the idle'th empty round in a row, begun at
// now, whether to poll again (true) or to sleep. With Config.IdleRounds 0
// it polls only while no other task was found to want the CPU (see
// preemptedAfter) and the silence since the last packet is shorter than
// the spin limit (see spin.go). Spin polls
// IdleRounds (64 by default) rounds between maintenance passes; a positive
// IdleRounds is a fixed count; a negative one sleeps at once.
func (p *Poller) keepPolling(now time.Duration, idle int) bool {
	switch r := p.cfg.IdleRounds; {
	case p.cfg.Spin:
		return idle <= max(r, spinRounds)
	case r > 0:
		return idle <= r
	case r < 0:
		return false
	}
	return now >= p.calmUntil && now-p.lastPkt < p.spinLimit
}

// clockEvery: with Config.Spin or a positive IdleRounds, every
// clockEvery'th empty round polled again reads the clock (see loop).
const clockEvery = 8

// A round that begins more than preemptedAfter sleep costs after an empty
// round the poller polled again means the scheduler ran something else
// meanwhile; the poller then sleeps as soon as a round comes up empty for
// the next calmFor sleep costs (some scheduler time slices).
const (
	preemptedAfter = 10
	calmFor        = 1000
)

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
			// the part we have.
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

// touchFirst reads the first byte of every descriptor's buffer that lies
// inside mem (Config.Prefetch) and returns their sum, which the caller
// keeps so that the reads are not optimised away. Each read is
// independent of the others: the CPU overlaps their cache misses.
func touchFirst(mem []byte, descs []xsk.Desc) byte {
	var t byte
	for _, d := range descs {
		if d.Addr < uint64(len(mem)) {
			t += mem[d.Addr]
		}
	}
	return t
}

// recycle queues a frame of s's UMEM for its Fill ring.
func (p *Poller) recycle(s *sock, addr uint64) {
	if len(s.stash) == cap(s.stash) {
		p.flushStash(s)
	}
	s.stash = append(s.stash, addr&s.base)
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

// flushStash gives the stash to the Fill ring, and what does not fit to
// the allocator.
func (p *Poller) flushStash(s *sock) {
	n := p.produce(s, s.stash)
	if n < len(s.stash) {
		if err := s.pool.u.PutBatch(s.stash[n:]); err != nil {
			panic("rxpath: " + err.Error()) // a frame we took twice: a bug here
		}
	}
	s.stash = s.stash[:0]
}

// refill tops s's Fill ring up to its target: from the stash first, then
// from the allocator. Unless force, it waits until a batch is worth it.
// It wakes the kernel when the ring asks for it.
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
		err := s.pool.u.PutBatch(s.stash)
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
// the kernel and did not get back (on Fill rings, on RX rings unread) and
// every descriptor it read but did not deliver. The kernel may write
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
