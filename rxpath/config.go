package rxpath

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	DefaultWeight    = 64                   // NAPI_POLL_WEIGHT
	DefaultBudget    = 300                  // net.core.netdev_budget
	DefaultRoundTime = 2 * time.Millisecond // net.core.netdev_budget_usecs
	DefaultFillBatch = 64
	// DefaultCopyThreshold is the largest packet copied out rather than
	// lent. BenchmarkDeliver (deliver_bench_test.go; make bench reports it
	// in bench/out/summary.md with the threshold it gives per run) sets
	// it: the largest size at which, for a handler that owns the bytes
	// after Receive, copying into its buffer (the frame straight back to
	// the Fill ring) is not slower than keeping the frame and handing it
	// back through the allocator to the Fill ring, by the median over
	// rounds of the paired time ratio. A handler that only reads in place
	// ("lend" there) pays for the copy at every size. The crossing moves
	// with the CPU and with the host's state (make bench's spread table
	// lists it per run); the default is a size the benchmark has given on
	// the development machines, not a promise. Set
	// Config.CopyThreshold from BenchmarkDeliver on the machine that runs
	// it.
	DefaultCopyThreshold = 256
)

// Errors returned by New and Run.
var (
	ErrConfig    = errors.New("rxpath: invalid config")
	ErrNoSockets = errors.New("rxpath: no sockets")
	ErrNoRX      = errors.New("rxpath: socket has no RX ring")
	ErrRunning   = errors.New("rxpath: Run already running")
	ErrOpen      = errors.New("rxpath: sockets still open")
)

// Config configures a Poller. A nil *Config means all defaults.
type Config struct {
	// Weight is the most packets one visit takes from one socket
	// (default 64).
	Weight int
	// Budget is the most packets one round takes from all sockets
	// (default 300). It is raised to Weight if smaller.
	Budget int
	// RoundTime ends a round early once it has run this long (default
	// 2 ms); negative means no time limit.
	RoundTime time.Duration
	// CopyThreshold is the largest single-buffer packet that is copied
	// out instead of lent (default DefaultCopyThreshold). Negative lends
	// every packet.
	CopyThreshold int
	// FillBatch is the smallest number of frames put on a Fill ring at
	// once while the ring still has frames (default 64).
	FillBatch int
	// FillFrames is how many frames each socket keeps on its Fill ring.
	// Default: the ring's size, but at most the socket's share of the
	// frames of its UMEM, divided evenly among the poller's sockets that
	// share it; of a UMEM that any of them can also send from (a socket
	// with a TX ring) only half the frames are shared out, so that a
	// txpath.Sender on it still finds frames free. A larger value is
	// capped the same way only by the ring size. Lower it to leave more
	// frames for sending.
	FillFrames int
	// BusyPoll starts every round with a recvfrom on each socket, which
	// busy-polls the driver when the socket was created with
	// xsk.Config.PreferBusyPoll (and BusyPollTimeout/BusyPollBudget).
	// Off by default: on veth in copy mode it costs a system call per
	// round and saves nothing (xdpkitbench -m rxdrop --busy-poll 64
	// against the default, in make bench's topology).
	BusyPoll bool
	// Spin locks Run to its OS thread and never sleeps.
	Spin bool
	// RuntimeSleep makes Run sleep in the Go runtime's network poller
	// also while packets flow. By default, while packets flow (one came
	// within the last 5 ms), Run sleeps in ppoll(2) on its sockets on the
	// thread that runs it, as a C receiver sleeps in poll(2): a wake-up
	// costs one system call instead of the runtime's park, two
	// epoll_pwait and the goroutine's scheduling. Meanwhile the goroutine
	// keeps its P, as a goroutine that computes does, and yields it every
	// 4 ms or so. It does so only while a P is left for the rest of the
	// process: while fewer of its Pollers sleep so than GOMAXPROCS less
	// one (never with GOMAXPROCS 1; package mq keeps GOMAXPROCS above its
	// number of queues). Once no packet came for 5 ms it sleeps in the runtime's
	// poller, holding nothing (see the package documentation). With
	// RuntimeSleep every sleep is the runtime's: the P is free during
	// every sleep, at more CPU per wake-up. Not with Spin.
	RuntimeSleep bool
	// IdleRounds is how many empty rounds the Poller polls, after a
	// round that took packets, before it sleeps. 0 (the default) decides
	// from measurement: nap within a delay budget if one is set (see
	// MaxDelay), else poll again only while the silence since the last
	// packet is shorter than the spin limit that would have cost the
	// recent idle periods least CPU, against a sleep's CPU measured
	// while running (Stats.SpinLimit, Stats.SleepCPU), and the poller
	// has been awake for less than 3 SleepCosts since it last slept (the
	// duty rule; see the package documentation). A positive value is a
	// fixed count; negative sleeps as soon as a round comes up
	// empty-handed. Neither naps. With Spin, the empty rounds between
	// maintenance passes (at least 64).
	IdleRounds int
	// Coalesce is how long the poller naps after an empty round while
	// packets flow, with IdleRounds 0, within a delay budget (MaxDelay).
	// The default Poller has no budget and never naps; an explicit
	// Coalesce is the nap asked for and, where MaxDelay is 0, its own
	// budget (with a negative MaxDelay it is an ErrConfig). A nap lets
	// packets gather on the RX rings and takes them in one round, as the
	// kernel's NAPI deferral (gro_flush_timeout) does, instead of polling
	// through the gaps between them or being woken for each: less CPU per
	// packet, more delay. A packet may wait on the ring for up to a nap
	// (Stats.NapTime: the timer plus a wake-up, which is late on a
	// contended CPU). The poller naps only while the expected gap to the
	// next packet plus its mean deviation, and the silence since the last
	// one, are shorter than a nap; otherwise the spin rule decides
	// between polling again and sleeping until a socket is readable. Nor
	// does it nap while naps overrun: while NapTime exceeds 4 times the
	// nap's timer, or MaxDelay, plus two SleepCosts (a contended CPU
	// wakes the poller late, and a late nap leaves the RX ring
	// unattended), but for one nap every 256 NapTimes, to measure again.
	// Negative (or a non-zero IdleRounds) never naps.
	Coalesce time.Duration
	// MaxDelay is the most a packet may wait on an RX ring by the
	// Poller's choice: with a positive MaxDelay the poller naps while
	// packets flow (see Coalesce; its timer is Coalesce, by default 4
	// SleepCosts, cut to MaxDelay), so a packet that arrives as a nap
	// begins is taken at most MaxDelay plus one wake-up (the timer's
	// lateness, about a SleepCost) later. A larger budget gathers more
	// packets per wake-up and costs less CPU per packet (make bench's
	// latency rows measure both). 0, the default, is no budget: the
	// poller never naps (unless Coalesce is set, which is then the
	// budget); it polls through short gaps and sleeps until a socket is
	// readable through long ones (and once in a while through a steady
	// stream of short ones: the duty rule), so a packet waits at most a
	// sleep's wake-up, as for a C receiver in poll(2). Negative never naps, whatever Coalesce says. MaxDelay
	// does not bound what the kernel adds (NAPI deferral, a busy CPU),
	// nor a sleep: a sleeping Poller is woken by the first packet, a
	// wake-up later.
	MaxDelay time.Duration
	// Metadata reads the RX metadata record that an XDP program attached
	// with xsk.ProgramConfig.Metadata writes in front of each frame into
	// the Packet (RXHash, RXTimestamp, XDPTime; meta.go). Off, a packet
	// has none and nothing is read.
	Metadata bool
	// Prefetch makes the poller read one byte of every cache line of the
	// first 128 bytes (the headers) of each packet of a batch it takes
	// from an RX ring, before it hands the handler the first packet: up
	// to three reads per packet (two where it starts on a 64-byte line,
	// fewer for a short one). A multi-buffer packet's
	// later buffers, which hold payload, are not read ahead, nor are the
	// buffers it takes afterwards to complete a packet that the batch
	// ends in the middle of. In copy mode the kernel writes each frame on
	// the CPU that ran its RX path, so a handler that reads the headers
	// (a parser, a forwarder, a receiver that checks payloads) takes a
	// cache miss for each line it reads, one packet after the other;
	// these reads are independent of each other, so their misses
	// overlap. It pays where a batch holds many packets (NAPI deferral,
	// bursts, high rates). Set it for such a handler; one that does not
	// read its packets (a drop counter) pays for reads it does not need.
	// Off by default.
	Prefetch bool
}

func (c *Config) setDefaults() error {
	if c.Weight == 0 {
		c.Weight = DefaultWeight
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.RoundTime == 0 {
		c.RoundTime = DefaultRoundTime
	}
	if c.CopyThreshold == 0 {
		c.CopyThreshold = DefaultCopyThreshold
	}
	if c.FillBatch == 0 {
		c.FillBatch = DefaultFillBatch
	}
	switch {
	case c.Weight < 0 || c.Weight > 1<<16:
		return fmt.Errorf("%w: Weight %d", ErrConfig, c.Weight)
	case c.Budget < 0:
		return fmt.Errorf("%w: Budget %d", ErrConfig, c.Budget)
	case c.FillBatch < 0:
		return fmt.Errorf("%w: FillBatch %d", ErrConfig, c.FillBatch)
	case c.FillFrames < 0:
		return fmt.Errorf("%w: FillFrames %d", ErrConfig, c.FillFrames)
	case c.MaxDelay > time.Second:
		return fmt.Errorf("%w: MaxDelay %v", ErrConfig, c.MaxDelay)
	case c.Coalesce > time.Second:
		return fmt.Errorf("%w: Coalesce %v", ErrConfig, c.Coalesce)
	case c.Coalesce > 0 && c.MaxDelay < 0:
		return fmt.Errorf("%w: Coalesce %v with MaxDelay %v (no naps)", ErrConfig, c.Coalesce, c.MaxDelay)
	case c.CopyThreshold > 1<<16:
		return fmt.Errorf("%w: CopyThreshold %d", ErrConfig, c.CopyThreshold)
	case c.Spin && c.RuntimeSleep:
		return fmt.Errorf("%w: Spin and RuntimeSleep (a spinning poller never sleeps)", ErrConfig)
	}
	c.Budget = max(c.Budget, c.Weight)
	return nil
}
