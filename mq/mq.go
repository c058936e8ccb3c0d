package mq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Errors returned by Open, Run and Close.
var (
	ErrConfig     = errors.New("mq: invalid config")
	ErrRunning    = errors.New("mq: already running")
	ErrClosed     = errors.New("mq: set closed")
	ErrFramesLost = errors.New("mq: frames not returned to their UMEM")
)

// Config describes a Set. Open validates it.
type Config struct {
	// Ifnames are the one or two interfaces every queue has a socket on.
	// With two, a queue's sockets share its UMEM so that frames received
	// on one can be sent on the other.
	Ifnames []string
	// Queues are the queue ids to open, the same on every interface.
	// Default: 0 .. n-1, n the number of queues of the interface that has
	// fewest.
	Queues []int
	// CPUs are the CPUs the queues run on, one per queue in the order of
	// Queues. Default: AssignCPUs(len(Queues), ExcludeCPUs).
	CPUs []int
	// ExcludeCPUs are CPUs the default assignment skips.
	ExcludeCPUs []int
	// NoPin runs the queues' goroutines on unpinned threads.
	NoPin bool
	// UMEM configures each queue's UMEM. Default: 2048-byte frames, 4096
	// of them per interface.
	UMEM umem.Config
	// Socket configures every socket.
	Socket xsk.Config
	// Program configures the XDP program attached to each interface;
	// NoProgram attaches none (TX only).
	Program   *xsk.ProgramConfig
	NoProgram bool
	// TXProgram is the rule for TX-only sockets (NoProgram with
	// Socket.NoRX): where it says so, each interface gets a native XDP
	// program that passes everything, which some drivers need for
	// zero-copy TX (xsk.Socket.AttachTXProgram), released on Close.
	TXProgram xsk.TXProgram
	// Poller configures each queue's Poller; NoPoller makes none (TX
	// only, or an application that reads the rings itself).
	Poller   rxpath.Config
	NoPoller bool
	// Sender, when not nil, gives every socket a txpath.Sender with this
	// configuration. Leave it nil when the application produces on the TX
	// rings itself (a forwarder): two producers on one ring do not mix.
	Sender *txpath.Config
}

// Counters are a queue's own counters for the application, in cache lines
// of their own. The queue's goroutine writes them; anyone may read them.
type Counters struct {
	_       cpu.CacheLinePad
	Packets atomic.Uint64
	Bytes   atomic.Uint64
	Drops   atomic.Uint64
	_       cpu.CacheLinePad
}

// Queue is one queue of a Set: its UMEM, its sockets (one per interface,
// in the order of Config.Ifnames), their Senders, its Poller and its CPU.
// Everything in it is used by the queue's goroutine only while Run runs.
type Queue struct {
	ID      int // the queue id on every interface
	Index   int // position in the Set
	CPU     int // the CPU its thread is pinned to; -1 with NoPin
	UMEM    *umem.UMEM
	Sockets []*xsk.Socket
	Senders []*txpath.Sender // one per socket with Config.Sender, else nil
	Poller  *rxpath.Poller   // nil with NoPoller
	// Counters are the application's counters for this queue.
	Counters *Counters

	tid atomic.Int64 // the thread running the queue, 0 when none
	cpu atomic.Int64 // CPU time of the thread in the last Run or Go, ns
}

// CPUTime is the CPU time (user and system, CLOCK_THREAD_CPUTIME_ID) the
// queue's thread used during the last Run or Go, known once it returned:
// the queue's own cost, including the kernel work done in its system
// calls (copy-mode transmit, wake-ups).
func (q *Queue) CPUTime() time.Duration { return time.Duration(q.cpu.Load()) }

// Thread returns the id of the OS thread serving the queue while Run
// runs, and 0 otherwise.
func (q *Queue) Thread() int { return int(q.tid.Load()) }

// Set is a group of queues served in parallel.
type Set struct {
	cfg    Config
	queues []*Queue
	progs  []*xsk.Program

	mu      sync.Mutex
	running bool
	stop    context.CancelFunc
	done    chan struct{}
	closed  bool
	closeMu sync.Mutex
	err     error
}

var _ io.Closer = (*Set)(nil)

// Open creates the queues of a Set: per queue a UMEM, a socket on each
// interface, their Senders and a Poller; and on each interface the XDP
// program with every queue's socket registered. Call it on a thread in
// the interfaces' network namespace (sockets stay in the namespace they
// were made in; the queues' goroutines may run anywhere). On error
// nothing stays open.
func Open(cfg *Config) (*Set, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: nil config", ErrConfig)
	}
	c := *cfg
	if len(c.Ifnames) < 1 || len(c.Ifnames) > 2 || (len(c.Ifnames) == 2 && c.Ifnames[0] == c.Ifnames[1]) {
		return nil, fmt.Errorf("%w: %d interfaces %q (want one or two distinct)", ErrConfig, len(c.Ifnames), c.Ifnames)
	}
	if c.Queues == nil {
		n := 0
		for i, name := range c.Ifnames {
			info, err := netdev.Get(name)
			if err != nil {
				return nil, fmt.Errorf("mq: %w", err)
			}
			if i == 0 || info.RxQueues < n {
				n = info.RxQueues
			}
		}
		for q := range n {
			c.Queues = append(c.Queues, q)
		}
	}
	if len(c.Queues) == 0 {
		return nil, fmt.Errorf("%w: no queues", ErrConfig)
	}
	for i, q := range c.Queues {
		if q < 0 || slices.Contains(c.Queues[:i], q) {
			return nil, fmt.Errorf("%w: queues %v (negative or twice)", ErrConfig, c.Queues)
		}
	}
	switch {
	case c.NoPin:
		c.CPUs = make([]int, len(c.Queues))
		for i := range c.CPUs {
			c.CPUs[i] = -1
		}
	case c.CPUs == nil:
		cpus, err := AssignCPUs(len(c.Queues), c.ExcludeCPUs)
		if err != nil {
			return nil, err
		}
		c.CPUs = cpus
	case len(c.CPUs) != len(c.Queues):
		return nil, fmt.Errorf("%w: %d CPUs for %d queues", ErrConfig, len(c.CPUs), len(c.Queues))
	}
	if c.UMEM.FrameSize == 0 {
		c.UMEM.FrameSize = 2048
	}
	if c.UMEM.FrameCount == 0 {
		c.UMEM.FrameCount = 4096 * uint32(len(c.Ifnames))
	}
	s := &Set{cfg: c}
	if err := s.open(); err != nil {
		s.teardown()
		return nil, err
	}
	return s, nil
}

func (s *Set) open() error {
	c := &s.cfg
	if !c.NoProgram {
		// The XSKMAP must hold the highest queue id: a queue beyond its
		// default size (xsk.ProgramConfig.MaxQueues, 64) grows it.
		var pc xsk.ProgramConfig
		if c.Program != nil {
			pc = *c.Program
		}
		for _, id := range c.Queues {
			if id >= 64 && id >= pc.MaxQueues {
				pc.MaxQueues = id + 1
			}
		}
		for _, name := range c.Ifnames {
			p, err := xsk.AttachProgram(name, &pc)
			if err != nil {
				return fmt.Errorf("mq: XDP program on %s: %w", name, err)
			}
			s.progs = append(s.progs, p)
		}
	}
	for i, id := range c.Queues {
		q := &Queue{ID: id, Index: i, CPU: c.CPUs[i], Counters: new(Counters)}
		s.queues = append(s.queues, q)
		u, err := umem.New(&c.UMEM)
		if err != nil {
			return fmt.Errorf("mq: queue %d: %w", id, err)
		}
		q.UMEM = u
		for _, name := range c.Ifnames {
			sk, err := xsk.New(name, id, u, &c.Socket)
			if err != nil {
				return fmt.Errorf("mq: queue %d of %s: %w", id, name, err)
			}
			q.Sockets = append(q.Sockets, sk)
			if c.NoProgram && c.Socket.NoRX {
				if _, err := sk.AttachTXProgram(c.TXProgram); err != nil {
					return fmt.Errorf("mq: queue %d of %s: %w", id, name, err)
				}
			}
			if c.Sender != nil {
				snd, err := txpath.New(sk, c.Sender)
				if err != nil {
					return fmt.Errorf("mq: sender on queue %d of %s: %w", id, name, err)
				}
				q.Senders = append(q.Senders, snd)
			}
		}
		if !c.NoPoller && !c.Socket.NoRX {
			pc := c.Poller
			p, err := rxpath.New(&pc, q.Sockets...)
			if err != nil {
				return fmt.Errorf("mq: poller of queue %d: %w", id, err)
			}
			q.Poller = p
		}
	}
	for j, p := range s.progs {
		for _, q := range s.queues {
			if err := p.Register(q.Sockets[j]); err != nil {
				return fmt.Errorf("mq: register queue %d of %s: %w", q.ID, c.Ifnames[j], err)
			}
		}
	}
	return nil
}

// Queues returns the Set's queues, in the order of Config.Queues.
func (s *Set) Queues() []*Queue { return s.queues }

// Ifnames returns the interfaces the Set serves.
func (s *Set) Ifnames() []string { return s.cfg.Ifnames }

// Programs returns the XDP programs, one per interface (none with
// NoProgram).
func (s *Set) Programs() []*xsk.Program { return s.progs }

// Run serves every queue with the handler that newHandler returns for it,
// each queue's Poller on its own goroutine pinned to the queue's CPU,
// until ctx ends or Close is called. It returns nil when stopped that
// way, and otherwise the first queue's error (which stops the others).
func (s *Set) Run(ctx context.Context, newHandler func(q *Queue) rxpath.Handler) error {
	for _, q := range s.queues {
		if q.Poller == nil {
			return fmt.Errorf("%w: queue %d has no poller", ErrConfig, q.ID)
		}
	}
	return s.Go(ctx, func(ctx context.Context, q *Queue) error {
		return q.Poller.Run(ctx, newHandler(q))
	})
}

// Go runs fn once per queue, each on its own goroutine locked to an OS
// thread pinned to the queue's CPU, until every fn has returned. The
// context fn gets ends with ctx, with Close, or when another queue's fn
// failed. Go returns nil when every fn returned nil or the context's
// error, and otherwise the first other error. Only one Run or Go at a
// time.
func (s *Set) Go(ctx context.Context, fn func(ctx context.Context, q *Queue) error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.running {
		s.mu.Unlock()
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	s.running, s.stop, s.done = true, cancel, make(chan struct{})
	s.mu.Unlock()

	acquireProcs(len(s.queues))
	defer releaseProcs(len(s.queues))
	errs := make([]error, len(s.queues))
	var wg sync.WaitGroup
	for i, q := range s.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.serve(ctx, q, fn)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	cancel()
	s.mu.Lock()
	s.running = false
	close(s.done)
	s.mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// serve runs fn for q on a locked thread, pinned unless NoPin. A pinned
// goroutine never unlocks: when it ends, its thread ends too.
func (s *Set) serve(ctx context.Context, q *Queue, fn func(ctx context.Context, q *Queue) error) error {
	if q.CPU >= 0 {
		tid, err := PinThread(q.CPU)
		if err != nil {
			return fmt.Errorf("queue %d: %w", q.ID, err)
		}
		q.tid.Store(int64(tid))
	} else {
		runtime.LockOSThread() // its own thread all the same, with its affinity untouched
		defer runtime.UnlockOSThread()
		q.tid.Store(int64(unix.Gettid()))
	}
	defer q.tid.Store(0)
	t0 := threadCPU()
	err := fn(ctx, q)
	q.cpu.Store(int64(threadCPU() - t0))
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("mq: queue %d: %w", q.ID, err)
	}
	return nil
}

// Close stops Run or Go, waits for every queue's goroutine, and releases
// everything: it gives the TX rings up to a second to complete what they
// hold, closes the Senders, detaches the XDP programs, closes the
// sockets, reclaims the frames the pollers lent to the kernel, and closes
// the UMEMs. It returns ErrFramesLost (with the UMEM's accounting) when a
// UMEM did not get all its frames back. Close is idempotent.
func (s *Set) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.err
	}
	s.closed = true
	running, stop, done := s.running, s.stop, s.done
	s.mu.Unlock()
	if running {
		stop()
		<-done
	}
	s.err = s.teardown()
	return s.err
}

func (s *Set) teardown() error {
	var errs []error
	// Let the TX rings drain while the sockets are still open: the
	// Senders their own frames, drain the frames the application put on
	// the rings itself.
	for _, q := range s.queues {
		for _, snd := range q.Senders {
			if err := snd.Close(); err != nil && !errors.Is(err, txpath.ErrInFlight) {
				errs = append(errs, err)
			}
		}
	}
	s.drain(time.Second)
	for _, p := range s.progs {
		errs = append(errs, p.Close())
	}
	for _, q := range s.queues {
		for _, sk := range q.Sockets {
			errs = append(errs, sk.Close())
		}
		if q.Poller != nil {
			if _, err := q.Poller.Reclaim(); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, q.Poller.Close())
		}
		for _, snd := range q.Senders {
			if _, err := snd.Reclaim(); err != nil {
				errs = append(errs, err)
			}
		}
		if q.UMEM != nil {
			if a := q.UMEM.Accounting(); a.Free != a.Total {
				errs = append(errs, fmt.Errorf("%w: queue %d: %s", ErrFramesLost, q.ID, a))
			}
			errs = append(errs, q.UMEM.Close())
		}
	}
	return errors.Join(errs...)
}

// drain kicks every TX ring and reaps every completion ring until no
// frame of any queue is on a TX ring, or until the rings made no progress
// for timeout (a slow or loaded machine completes later, not never; at
// most 10 timeouts in all). Frames that Senders sent are reaped by their
// Senders (Close); the others, which the application produced itself,
// come back to the UMEM here.
func (s *Set) drain(timeout time.Duration) {
	start := time.Now()
	deadline := start.Add(timeout)
	addrs := make([]uint64, 256)
	last := -1
	for {
		busy := false
		left := 0
		for _, q := range s.queues {
			if q.UMEM == nil {
				continue
			}
			// Frames a Sender still has in flight after its Close gave
			// up are its own to reclaim: waiting here for them would only
			// add the timeout again.
			tx := q.UMEM.Accounting().TX
			for _, snd := range q.Senders {
				tx -= snd.InFlight()
			}
			if tx <= 0 {
				continue
			}
			busy = true
			left += tx
			for j, sk := range q.Sockets {
				if sk.TX() == nil {
					continue
				}
				if sk.TX().Pending() > 0 {
					_ = sk.KickTX() // a socket whose link went away completes nothing: the timeout ends it
				}
				if j < len(q.Senders) {
					continue // the Sender's Reclaim gives back what it did not reap
				}
				for {
					n := sk.Completion().Consume(addrs)
					if n == 0 {
						break
					}
					_ = q.UMEM.PutBatch(addrs[:n])
				}
			}
		}
		now := time.Now()
		if left != last {
			last, deadline = left, now.Add(timeout)
		}
		if !busy || now.After(deadline) || now.Sub(start) > 10*timeout {
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}
