package rxpath_test

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// checker verifies datagrams from sender flows: byte-exact, in order per
// flow. It runs on the poller's goroutine.
type checker struct {
	ports  []uint16
	next   []int
	size   int
	want   []byte
	joined []byte
	got    atomic.Int64
	bad    atomic.Int64
	err    atomic.Pointer[string]
	segs   int // most segments seen
}

func newChecker(ports []uint16, size int) *checker {
	return &checker{ports: ports, next: make([]int, len(ports)), size: size,
		want: make([]byte, 9000), joined: make([]byte, 0, 9100)}
}

func (c *checker) fail(format string, args ...any) {
	c.bad.Add(1)
	msg := fmt.Sprintf(format, args...)
	c.err.CompareAndSwap(nil, &msg)
}

func (c *checker) check(pkt *rxpath.Packet) {
	frame := pkt.Data
	if len(pkt.Segments) > 1 {
		c.joined = c.joined[:0]
		for _, s := range pkt.Segments {
			c.joined = append(c.joined, s...)
		}
		frame = c.joined
		c.segs = max(c.segs, len(pkt.Segments))
	}
	if len(frame) != pkt.Len {
		c.fail("packet Len %d, segments hold %d", pkt.Len, len(frame))
		return
	}
	pl, sport, ok := udpPayload(frame)
	if !ok || len(pl) < 6 {
		c.fail("not a UDP datagram: % x", frame[:min(len(frame), 64)])
		return
	}
	f := slices.Index(c.ports, sport)
	if f < 0 {
		c.fail("unknown source port %d", sport)
		return
	}
	seq := int(uint32(pl[2])<<24 | uint32(pl[3])<<16 | uint32(pl[4])<<8 | uint32(pl[5]))
	if seq != c.next[f] {
		c.fail("flow %d: datagram %d arrived, want %d", f, seq, c.next[f])
	}
	c.next[f] = seq + 1
	if w := payload(c.want, f, seq, c.size); !bytes.Equal(pl, w) {
		c.fail("flow %d datagram %d: %d bytes differ from the %d sent", f, seq, len(pl), len(w))
	}
	c.got.Add(1)
}

func TestReceive100k(t *testing.T) {
	b := newBed(t, bedConfig{})
	const flows, perFlow = 4, 25000
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), flows)
	chk := newChecker(snd.srcPorts(), 1400)
	var kept []xsk.Desc
	var nkept int
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		chk.check(p)
		// Keep every 7th lent packet and give it back through the
		// allocator, as a handler that holds frames would.
		if !p.Copied() && p.Len%7 == 0 {
			kept = p.Keep(kept[:0])
			nkept++
			for _, d := range kept {
				if err := b.u.Put(d.Addr); err != nil {
					chk.fail("put kept frame: %v", err)
				}
			}
		}
	}))
	start := time.Now()
	// At most 200 in flight: below the 256-entry ring in which veth queues
	// packets for its XDP program. A larger window overflows that ring
	// when softirqs are deferred on a loaded machine, and veth drops.
	err := snd.send(perFlow, 1400, 200, &chk.got, 60*time.Second)
	for chk.got.Load()+chk.bad.Load() < flows*perFlow && time.Since(start) < 60*time.Second && err == nil {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	if rerr := stop(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := b.stats(t)
	t.Logf("%d datagrams in %v: %s; kept %d", chk.got.Load(), elapsed, &st, nkept)
	if m := chk.err.Load(); m != nil {
		t.Fatalf("%d bad datagrams, first: %s", chk.bad.Load(), *m)
	}
	if got := chk.got.Load(); got != flows*perFlow {
		t.Fatalf("received %d datagrams, want %d", got, flows*perFlow)
	}
	if st.Copied == 0 || st.Lent == 0 || st.Kept == 0 {
		t.Errorf("copied %d, lent %d, kept %d: want all three paths used", st.Copied, st.Lent, st.Kept)
	}
	if st.Invalid != 0 || st.Dropped != 0 {
		t.Errorf("invalid %d, dropped %d", st.Invalid, st.Dropped)
	}
	if st.MaxRound > rxpath.DefaultBudget || st.Sockets[0].MaxVisit > rxpath.DefaultWeight {
		t.Errorf("max round %d (budget %d), max visit %d (weight %d)", st.MaxRound, rxpath.DefaultBudget,
			st.Sockets[0].MaxVisit, rxpath.DefaultWeight)
	}
	if x := st.Sockets[0].XDP; x.RXDropped != 0 || x.RXInvalidDescs != 0 || x.RXRingFull != 0 {
		t.Errorf("kernel dropped packets: %+v", x)
	}
	// The spin rule's bounds (whether any sleep was a sample depends on
	// timing: see sleptFor).
	if st.SpinLimit > st.SleepCost {
		t.Errorf("spin limit %v beyond SleepCost %v", st.SpinLimit, st.SleepCost)
	}
	// A sample is at most half its sleep, which is at most 4 SleepCosts:
	// the test's senders, busy in this process, are kept out.
	if st.SleepCPU > 2*st.SleepCost {
		t.Errorf("SleepCPU %v beyond 2 SleepCosts (%v)", st.SleepCPU, st.SleepCost)
	}
}

func TestTwoQueuesShare(t *testing.T) {
	const weight, budget = 32, 100
	b := newBed(t, bedConfig{queues: 2, rx: rxpath.Config{Weight: weight, Budget: budget}})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 16)
	var perQueue [2]atomic.Int64
	var got atomic.Int64
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		perQueue[p.Index].Add(1)
		got.Add(1)
		// A slow handler, so that both RX rings back up.
		for t0 := time.Now(); time.Since(t0) < 3*time.Microsecond; {
		}
	}))
	// 200 in flight: twice the budget, so rounds fill up, and below the
	// 256 entries of veth's XDP ring, so that none is dropped even if
	// most flows hash to one queue.
	err := snd.send(6000, 64, 200, &got, 20*time.Second)
	waitCount(&got, snd.sent.Load(), 5*time.Second)
	if rerr := stop(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := b.stats(t)
	q0, q1 := perQueue[0].Load(), perQueue[1].Load()
	t.Logf("sent %d, queue 0 got %d, queue 1 got %d; %s", snd.sent.Load(), q0, q1, &st)
	for i, s := range st.Sockets {
		t.Logf("socket %d: visits %d, packets %d, max visit %d, XDP %+v", i, s.Visits, s.Packets, s.MaxVisit, s.XDP)
		if s.MaxVisit > weight {
			t.Errorf("socket %d: a visit took %d packets, weight %d", i, s.MaxVisit, weight)
		}
	}
	if st.MaxRound > budget {
		t.Errorf("a round took %d packets, budget %d", st.MaxRound, budget)
	}
	if st.FullRounds == 0 {
		t.Errorf("no round used its budget: the load did not back up the rings")
	}
	total := q0 + q1
	if total != snd.sent.Load() {
		t.Errorf("received %d of %d datagrams", total, snd.sent.Load())
	}
	// Fairness is the poller's: every round visits both sockets, so their
	// visit counts are equal. The packet shares are not: they follow how
	// the kernel hashed the 16 flows onto the two queues (4 and 12 flows
	// happens in about 8% of runs), and each queue gets all of its own.
	if q0 == 0 || q1 == 0 {
		t.Errorf("queue 0 got %d, queue 1 got %d: all 16 flows on one queue", q0, q1)
	}
	if v0, v1 := st.Sockets[0].Visits, st.Sockets[1].Visits; v0 != v1 && v0 != v1+1 && v1 != v0+1 {
		t.Errorf("unfair visits: socket 0 visited %d times, socket 1 %d times", v0, v1)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestIdle(t *testing.T) {
	b := newBed(t, bedConfig{queues: 2})
	// What the test process costs idle without a running poller (the
	// runtime's timers, the test goroutine's sleep), measured in this run
	// over the same wall time: the bound below is relative to it.
	// The garbage of earlier tests is collected first, here and before
	// each window below, so that no window pays for it.
	idleCost := func() (time.Duration, time.Duration) {
		runtime.GC()
		c0, w0 := cpuTime(), time.Now()
		time.Sleep(2 * time.Second)
		return cpuTime() - c0, time.Since(w0)
	}
	base, baseWall := idleCost()
	// And what one sleep and wake-up of a goroutine costs it in CPU on
	// this machine (an emulated one takes tens of times the host's).
	cw0 := cpuTime()
	for range 20 {
		time.Sleep(time.Millisecond)
	}
	perWake := (cpuTime() - cw0) / 20
	// Idle, the poller adds its few wake-ups and system calls to what
	// the process costs without it: each may take a few of the sleeps and
	// wake-ups measured above, and the process's own idle cost may double
	// on a noisy host. A poller that polled while idle would take a good
	// part of a CPU.
	allow := func(base time.Duration, st0, st1 rxpath.Stats) time.Duration {
		wakes := (st1.Sleeps - st0.Sleeps) + (st1.Syscalls - st0.Syscalls)
		return 2*base + time.Duration(wakes)*4*perWake + 2*time.Millisecond
	}
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {})) // returns once Run sleeps
	// The poller's window is taken up to three times, and the one that
	// cost least counts: what else runs in the process or on an emulated
	// machine only adds CPU to a window, while a poller that polled while
	// idle would cost a good part of a CPU in every one.
	var c0, c1 time.Duration
	var w0, w1 time.Time
	var st0, st1 rxpath.Stats
	for try := 0; try < 3; try++ {
		runtime.GC()
		s0 := b.stats(t)
		a0, v0 := cpuTime(), time.Now()
		time.Sleep(2 * time.Second)
		a1, v1 := cpuTime(), time.Now()
		s1 := b.stats(t)
		if try == 0 || a1-a0 < c1-c0 {
			c0, c1, w0, w1, st0, st1 = a0, a1, v0, v1, s0, s1
		}
		if c1-c0 <= allow(base, st0, st1) {
			break
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The process idle once more, after the poller: what ran in the
	// background all along (an emulated machine's timers, the runtime)
	// shows in both windows without a poller.
	if after, afterWall := idleCost(); after > base {
		base, baseWall = after, afterWall
	}
	cpu, wall := c1-c0, w1.Sub(w0)
	share := float64(cpu) / float64(wall)
	wakes := (st1.Sleeps - st0.Sleeps) + (st1.Syscalls - st0.Syscalls)
	t.Logf("idle for %v: %v of CPU (%.3f%%), without a poller %v in %v, %v per sleep and wake-up; rounds %d, sleeps %d, syscalls %d", wall, cpu, 100*share,
		base, baseWall, perWake, st1.Rounds-st0.Rounds, st1.Sleeps-st0.Sleeps, st1.Syscalls-st0.Syscalls)
	if allow := allow(base, st0, st1); cpu > allow {
		t.Errorf("idle poller: %v of CPU in %v, want at most %v (%v without a poller, %d wake-ups and system calls)", cpu, wall, allow, base, wakes)
	}
	// One getsockopt(SO_ERROR) per 500 ms quiet interval (closedWait),
	// to notice an interface that went away; nothing else.
	if d := st1.Syscalls - st0.Syscalls; d > uint64(len(b.socks))*uint64(2+wall/(500*time.Millisecond)) {
		t.Errorf("%d system calls while idle", d)
	}
	// The poller wakes every 500 ms (closedWait) to notice a socket
	// closed by another goroutine; nothing else may wake it.
	if d := st1.Sleeps - st0.Sleeps; d > uint64(2+wall/(500*time.Millisecond)) {
		t.Errorf("%d sleeps while idle", d)
	}
	// With no packet in sight, polling again does not pay: one round per
	// wake-up, no spins.
	if d, s := st1.Rounds-st0.Rounds, st1.Sleeps-st0.Sleeps; d > s+1 || st1.Spins != st0.Spins {
		t.Errorf("%d rounds and %d spins for %d sleeps while idle", d, st1.Spins-st0.Spins, s)
	}
}

func TestMultiBuffer9000(t *testing.T) {
	b := newBed(t, bedConfig{mtu: 9000, multiBuffer: true})
	const n = 3000
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	chk := newChecker(snd.srcPorts(), 9000-28)
	big := 0
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		chk.check(p)
		if p.Len == 9000+14 {
			big++
		}
	}))
	// payload sizes 18..8972: with 37*seq mod 8955, every size class
	// appears; add the largest explicitly below.
	// At most 200 in flight: below veth's 256-entry XDP ring.
	err := snd.send(n, 9000-28, 200, &chk.got, 30*time.Second)
	waitCount(&chk.got, n, 10*time.Second)
	if rerr := stop(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := b.stats(t)
	t.Logf("%s; most segments %d; XDP %+v", &st, chk.segs, st.Sockets[0].XDP)
	if m := chk.err.Load(); m != nil {
		t.Fatalf("%d bad datagrams, first: %s", chk.bad.Load(), *m)
	}
	if got := chk.got.Load(); got != n {
		t.Fatalf("received %d of %d datagrams", got, n)
	}
	if st.Chains == 0 || chk.segs < 3 {
		t.Errorf("%d multi-buffer packets, at most %d segments: want 9000-byte frames in 3 or more", st.Chains, chk.segs)
	}
}

// TestStarvation: a handler that keeps every lent frame empties the Fill
// ring; the poller counts it, does not hang, and resumes once the frames
// come back.
func TestStarvation(t *testing.T) {
	// Spin never sleeps, so it must refill from frames given back in its
	// idle passes, not only after rounds that took packets.
	// A RuntimeSleep poller recovers too (starved, both sleep in the
	// runtime's poller: this does not tell where its starved sleeps go).
	for _, mode := range []string{"sleep", "spin", "runtime"} {
		t.Run(mode, func(t *testing.T) { starvation(t, mode) })
	}
}

func starvation(t *testing.T, mode string) {
	b := newBed(t, bedConfig{frames: 256, rx: rxpath.Config{FillFrames: 128, CopyThreshold: -1, Spin: mode == "spin", RuntimeSleep: mode == "runtime"}})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	var held atomic.Int64
	keep := make(chan xsk.Desc, 4096)
	var descs []xsk.Desc
	stop := b.run(rxpath.HandlerFunc(func(p *rxpath.Packet) {
		descs = p.Keep(descs[:0])
		for _, d := range descs {
			keep <- d
		}
		held.Add(1)
	}))
	var none atomic.Int64
	// Bursts of 64 (below veth's 256-entry XDP ring: what is lost is lost
	// at the socket for want of Fill frames), each meeting a Fill ring of
	// at most 128 frames, until the handler holds all 256 frames and the
	// poller has counted a starved Fill ring.
	var st rxpath.Stats
	for deadline := time.Now().Add(20 * time.Second); ; {
		st, _ = b.poller.Stats()
		if held.Load() == 256 && st.FillStarved > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("held %d frames, fill starved %d times: want all 256 held and starvation counted", held.Load(), st.FillStarved)
		}
		h := held.Load()
		if err := snd.send(64, 64, 0, &none, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		// The burst is in the socket's queues once the handler has taken
		// what it will take; wait for that (bounded) before the next.
		waitStable(&held, h, 20*time.Millisecond, time.Second)
	}
	// Give the frames back; the poller must pick them up and receive again.
	for len(keep) > 0 {
		if err := b.u.Put((<-keep).Addr); err != nil {
			t.Fatal(err)
		}
	}
	before := held.Load()
	// The poller looks for frames again within its starvation wait.
	for deadline := time.Now().Add(2 * time.Second); b.u.Accounting().Fill == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(5 * time.Second); held.Load() == before && time.Now().Before(deadline); {
		if err := snd.send(10, 64, 0, &none, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		waitStable(&held, before, 20*time.Millisecond, time.Second)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for len(keep) > 0 {
		if err := b.u.Put((<-keep).Addr); err != nil {
			t.Fatal(err)
		}
	}
	st, _ = b.poller.Stats()
	t.Logf("held %d then %d; %s; XDP %+v; acct %s", before, held.Load(), &st, st.Sockets[0].XDP, b.u.Accounting())
	if held.Load() == before {
		t.Errorf("no packet received after the frames came back")
	}
}

var _ = umem.Free

// waitCount waits until c reaches n, at most limit.
func waitCount(c *atomic.Int64, n int64, limit time.Duration) {
	for deadline := time.Now().Add(limit); c.Load() < n && time.Now().Before(deadline); {
		time.Sleep(100 * time.Microsecond)
	}
}

// waitStable waits, at most limit, until c has moved from 'from' and then
// stayed put for quiet.
func waitStable(c *atomic.Int64, from int64, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last, since := c.Load(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		if v := c.Load(); v != last {
			last, since = v, time.Now()
		} else if v != from && time.Since(since) >= quiet {
			return
		}
	}
}

// roundCounter counts packets and round ends, and the most packets seen
// between two round ends.
type roundCounter struct {
	packets, rounds, inRound, maxInRound int
	got                                  atomic.Int64
}

func (r *roundCounter) Receive(p *rxpath.Packet) { r.packets++; r.inRound++; r.got.Add(1) }

func (r *roundCounter) EndRound() {
	r.rounds++
	r.maxInRound = max(r.maxInRound, r.inRound)
	r.inRound = 0
}

// TestRoundEnder: a handler that implements RoundEnder hears the end of
// every round, and no round hands it more than the budget.
func TestRoundEnder(t *testing.T) {
	const budget = 100
	b := newBed(t, bedConfig{rx: rxpath.Config{Weight: 32, Budget: budget}})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 4)
	h := &roundCounter{}
	stop := b.run(h)
	err := snd.send(3000, 64, 200, &h.got, 20*time.Second)
	waitCount(&h.got, snd.sent.Load(), 5*time.Second)
	if rerr := stop(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := b.stats(t)
	t.Logf("%d packets, %d round ends (stats: %d rounds), at most %d in a round", h.packets, h.rounds, st.Rounds, h.maxInRound)
	if int64(h.packets) != snd.sent.Load() {
		t.Errorf("received %d of %d datagrams", h.packets, snd.sent.Load())
	}
	if h.packets == 0 || uint64(h.rounds) != st.Rounds {
		t.Fatalf("%d round ends for %d rounds", h.rounds, st.Rounds)
	}
	if h.maxInRound > budget {
		t.Fatalf("a round delivered %d packets, budget %d", h.maxInRound, budget)
	}
}
