package rxpath

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/xdpkit/xdpkit/xsk"
)

// HistogramBuckets is the number of buckets of Stats.RoundHistogram.
const HistogramBuckets = 12

// Stats are a Poller's counters since New.
type Stats struct {
	Rounds     uint64 // polling rounds
	FullRounds uint64 // rounds that ended on their budget
	TimeRounds uint64 // rounds that ended on RoundTime
	MaxRound   uint64 // most packets taken in one round (<= Budget)
	Packets    uint64 // packets taken off the RX rings, delivered or dropped
	Frames     uint64 // descriptors taken off the RX rings
	Bytes      uint64 // bytes delivered
	Copied     uint64 // packets delivered as copies
	Lent       uint64 // packets delivered zero-copy
	Chains     uint64 // multi-buffer packets delivered (also counted in Lent)
	Kept       uint64 // lent packets the handler kept
	Dropped    uint64 // packets dropped for a bad descriptor
	Invalid    uint64 // descriptors outside the UMEM or naming a frame not lent
	Spins      uint64 // empty rounds polled again at once instead of sleeping
	Preempted  uint64 // spins the scheduler interrupted (another task wants the CPU: the poller then sleeps at once for 1000 SleepCosts)
	Sleeps     uint64 // times the poller went to sleep
	// ThreadWakeups counts the Wakeups of the poller from a
	// ppoll(2) on its own thread (while packets flowed) rather than from
	// a sleep in the Go runtime's poller.
	ThreadWakeups uint64
	Naps          uint64 // naps: timed sleeps while packets flow (the timer: Config.Coalesce or its default, cut to the delay budget)
	NapsEmpty     uint64 // naps after which the next round took nothing
	Wakeups       uint64 // sleeps ended by a readable socket
	Syscalls      uint64 // system calls made by the poller: RX wake-ups, busy polls, epoll_ctl arming the sockets for a sleep or disarming them for a nap or a busy stretch (see disarmAfter), a nap's timerfd calls, the CPU-clock reads that time naps and sleeps, the ppolls of the flow sleep (the blocking waits in the Go runtime's poller are not counted)
	FillEmpty     uint64 // refills that found a Fill ring empty
	FillStarved   uint64 // refills that found no frame to put on an empty Fill ring
	// SleepCost is how long a sleep in the Go runtime's poller and its
	// wake-up take on this host (SleepCost), as of the last Run: it sets
	// the duty rule's period and, with a delay budget, the nap's default
	// timer. ExpectedGap is the poller's current estimate of
	// the wait for the next packet, which the nap rule weighs.
	SleepCost   time.Duration
	ExpectedGap time.Duration
	// SleepCPU is the CPU time a sleep costs, from its start to the
	// wake-up a socket brought: the least of the last 8 samples, each
	// read on the process's CPU clock around one of every 16 sleeps, less
	// what one read of that clock costs
	// (every one of the Poller's first 128 sleeps until one counted).
	// Only a sleep that blocked, did not yield to other goroutines first,
	// lasted from half a SleepCost to 4 SleepCosts and took at most half
	// its wall time in CPU is a sample: other busy threads of the process count too, and add to a
	// sample in proportion to its length. 0 until one counted (the spin
	// rule then takes a sleep to cost a SleepCost). Only with
	// Config.IdleRounds 0.
	// SpinLimit is the spin rule's decision: with Config.IdleRounds 0
	// an empty round that does not nap is followed by another at once
	// (counted in Spins) only while the silence since the last packet
	// is shorter than SpinLimit; otherwise the poller sleeps. Every 64
	// idle periods (from the first empty round after packets to the
	// next packet) the poller sets it to the bound, among 0 and those of
	// its histogram of those periods up to SleepCPU and to SleepCost,
	// that would have cost the periods seen least CPU: a period within
	// the limit costs its length, a longer one the limit plus SleepCPU.
	// 0 until decided: sleep at once.
	SleepCPU  time.Duration
	SpinLimit time.Duration
	// NapTime is how long a nap lasts (a moving average: the nap's timer,
	// Config.Coalesce or its default cut to the delay budget, plus the
	// kernel's timer slack and wake-up), NapCost the CPU time one costs
	// (a biased-low moving average over every 16th nap, read on the
	// process's CPU clock: other busy threads of the process count too).
	// With Config.IdleRounds 0 and a delay budget (Config.MaxDelay, or an
	// explicit Config.Coalesce) the poller naps after an empty round while
	// ExpectedGap and the silence since the last packet are shorter than
	// NapTime and, unless Config.Coalesce is set explicitly, NapCost is
	// less than NapTime; see Config.Coalesce.
	NapTime time.Duration
	NapCost time.Duration
	// Deprecated: NapPacketCost, SleepPacketCost and NapsForgone are
	// always 0: the rule that weighed a nap's CPU per packet against a
	// sleep's is gone (no trace of the governor's simulator told it
	// apart from its absence).
	NapPacketCost   time.Duration
	SleepPacketCost time.Duration
	NapsForgone     uint64
	// RoundHistogram counts rounds by packets taken: bucket 0 is 0
	// packets, bucket i (i > 0) is 2^(i-1) to 2^i-1, the last bucket
	// everything above.
	RoundHistogram [HistogramBuckets]uint64
	Sockets        []SocketStats
}

// SocketStats are one socket's counters.
type SocketStats struct {
	Visits   uint64
	Packets  uint64
	Frames   uint64
	MaxVisit uint64    // most packets taken in one visit (<= Weight)
	XDP      xsk.Stats // the kernel's XDP_STATISTICS
}

// String gives the counters on one line, for logs.
func (s *Stats) String() string {
	return fmt.Sprintf("rounds %d (full %d, timed %d, max %d), packets %d (copied %d, lent %d, chains %d, kept %d, dropped %d), frames %d, invalid %d, spins %d (preempted %d), naps %d (empty %d, %v, cpu %v), sleeps %d (cpu %v, spin limit %v), wakeups %d (thread %d, sleep cost %v, expected gap %v), syscalls %d, fill empty %d, starved %d",
		s.Rounds, s.FullRounds, s.TimeRounds, s.MaxRound, s.Packets, s.Copied, s.Lent, s.Chains, s.Kept, s.Dropped,
		s.Frames, s.Invalid, s.Spins, s.Preempted, s.Naps, s.NapsEmpty, s.NapTime, s.NapCost, s.Sleeps, s.SleepCPU, s.SpinLimit, s.Wakeups, s.ThreadWakeups, s.SleepCost, s.ExpectedGap, s.Syscalls, s.FillEmpty, s.FillStarved)
}

// counters are written by Run only; mirror holds their values as of the
// last publish, for Stats from any goroutine.
type counters struct {
	rounds, fullRounds, timeRounds, maxRound    uint64
	bytes, copied, lent, chains, kept           uint64
	dropped, invalid, sleeps, wakeups, syscalls uint64
	fillEmpty, fillStarved, threadWakeups       uint64
	hist                                        [HistogramBuckets]uint64
}

type mirror struct {
	rounds, fullRounds, timeRounds, maxRound    atomic.Uint64
	spins, preempted, naps, napsEmpty           atomic.Uint64
	sleepCost, gap, napLen, napCost             atomic.Int64
	sleepCPU, spinLimit                         atomic.Int64
	bytes, copied, lent, chains, kept           atomic.Uint64
	dropped, invalid, sleeps, wakeups, syscalls atomic.Uint64
	fillEmpty, fillStarved, threadWakeups       atomic.Uint64
	hist                                        [HistogramBuckets]atomic.Uint64
}

type sockCounters struct{ visits, packets, frames, maxVisit uint64 }

type sockMirror struct{ visits, packets, frames, maxVisit atomic.Uint64 }

// publishEvery is how many rounds that took packets the poller runs
// between two publications of its counters when no Stats call asks for
// them: publish is some 25 atomic stores (XCHG on amd64), too many for
// rounds that carry a few packets each.
const publishEvery = 64

// published is called at the end of a round: it publishes the counters
// when a Stats call asked for them (one load of the request flag: a line
// only Stats writes) or after publishEvery rounds that took packets.
func (p *Poller) published(got int) {
	if got > 0 {
		p.unpub++
	}
	if p.unpub >= publishEvery || p.want.Load() {
		p.publish()
	}
}

// publish copies the counters to their mirrors: single writer, so plain
// stores of the running totals.
func (p *Poller) publish() {
	c, m := &p.c, &p.pub
	p.unpub = 0
	if p.want.Load() {
		p.want.Store(false)
	}
	m.rounds.Store(c.rounds)
	m.fullRounds.Store(c.fullRounds)
	m.timeRounds.Store(c.timeRounds)
	m.maxRound.Store(c.maxRound)
	m.bytes.Store(c.bytes)
	m.copied.Store(c.copied)
	m.lent.Store(c.lent)
	m.chains.Store(c.chains)
	m.kept.Store(c.kept)
	m.dropped.Store(c.dropped)
	m.invalid.Store(c.invalid)
	m.spins.Store(p.n.spins)
	m.preempted.Store(p.n.preempted)
	m.naps.Store(p.n.naps)
	m.napsEmpty.Store(p.n.napsEmpty)
	m.gap.Store(int64(p.gap))
	m.napLen.Store(int64(p.napLen))
	m.napCost.Store(int64(p.napCost))
	m.sleepCPU.Store(int64(p.sleepCPU))
	m.spinLimit.Store(int64(p.spinLimit))
	m.sleeps.Store(c.sleeps)
	m.wakeups.Store(c.wakeups)
	m.syscalls.Store(c.syscalls + p.n.clockReads)
	m.fillEmpty.Store(c.fillEmpty)
	m.fillStarved.Store(c.fillStarved)
	m.threadWakeups.Store(c.threadWakeups)
	for i := range c.hist {
		m.hist[i].Store(c.hist[i])
	}
	for _, s := range p.socks {
		s.pub.visits.Store(s.c.visits)
		s.pub.packets.Store(s.c.packets)
		s.pub.frames.Store(s.c.frames)
		s.pub.maxVisit.Store(s.c.maxVisit)
	}
}

// Stats returns the counters as last published, with each socket's
// XDP_STATISTICS read now. A running poller publishes them before every
// sleep, after every 64 rounds that took packets, at the end of Run, and
// at the end of the first round after a Stats call: of two Stats calls
// while the poller polls, the second sees counters at least as recent as
// the end of a round that ended after the first. It may be called from any goroutine, also while Run runs. The error is that of reading XDP_STATISTICS (a
// closed socket, for example); the other counters are valid regardless.
func (p *Poller) Stats() (Stats, error) {
	if !p.want.Load() {
		p.want.Store(true)
	}
	m := &p.pub
	st := Stats{
		Rounds: m.rounds.Load(), FullRounds: m.fullRounds.Load(), TimeRounds: m.timeRounds.Load(),
		MaxRound: m.maxRound.Load(), Bytes: m.bytes.Load(), Copied: m.copied.Load(), Lent: m.lent.Load(),
		Chains: m.chains.Load(), Kept: m.kept.Load(), Dropped: m.dropped.Load(), Invalid: m.invalid.Load(),
		Spins: m.spins.Load(), Preempted: m.preempted.Load(), Naps: m.naps.Load(), NapsEmpty: m.napsEmpty.Load(), Sleeps: m.sleeps.Load(), Wakeups: m.wakeups.Load(), Syscalls: m.syscalls.Load(),
		SleepCost: time.Duration(m.sleepCost.Load()), ExpectedGap: time.Duration(m.gap.Load()),
		SleepCPU: time.Duration(m.sleepCPU.Load()), SpinLimit: time.Duration(m.spinLimit.Load()),
		NapTime: time.Duration(m.napLen.Load()), NapCost: time.Duration(m.napCost.Load()),
		FillEmpty: m.fillEmpty.Load(), FillStarved: m.fillStarved.Load(), ThreadWakeups: m.threadWakeups.Load(),
		Sockets: make([]SocketStats, len(p.socks)),
	}
	for i := range m.hist {
		st.RoundHistogram[i] = m.hist[i].Load()
	}
	var firstErr error
	for i, s := range p.socks {
		ss := &st.Sockets[i]
		ss.Visits, ss.Packets = s.pub.visits.Load(), s.pub.packets.Load()
		ss.Frames, ss.MaxVisit = s.pub.frames.Load(), s.pub.maxVisit.Load()
		st.Packets += ss.Packets
		st.Frames += ss.Frames
		if s.s.FD() < 0 {
			continue
		}
		x, err := s.s.Stats()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		ss.XDP = x
	}
	return st, firstErr
}
