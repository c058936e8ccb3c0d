package rxpath

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNapCutShort: a nap that Run's end cuts short says nothing of how
// long a nap lasts or costs. Counting it would set the learned nap length
// (NapTime) to the cut, which is kept across Runs and can keep the
// poller from napping ever after (a nap is taken only while the expected
// gap is shorter than NapTime).
func TestNapCutShort(t *testing.T) {
	p := &Poller{}
	p.napped = func(uintptr) bool { return p.stop.Load() || p.napOver() } // as New sets it
	if err := p.initWait(); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const learned = 40 * time.Microsecond
	p.napLen = learned
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(time.Second))}
	p.stop.Store(true) // Run's context ended
	if err := p.nap(0); err != nil {
		t.Fatal(err)
	}
	if p.n.naps != 0 || p.napLen != learned {
		t.Errorf("after a nap cut short: naps %d, nap length %v; want 0 and %v", p.n.naps, p.napLen, learned)
	}
	var cur unix.ItimerSpec
	if err := unix.TimerfdGettime(p.tfd, &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Value.Sec != 0 || cur.Value.Nsec != 0 {
		t.Errorf("the nap's timer is still armed: %+v", cur.Value)
	}
}

// TestNapOverrun: naps that last far longer than their timer (a
// contended CPU wakes the poller late, and the RX ring overflows
// meanwhile) are not taken, but for one in napProbeEvery to measure
// again.
func TestNapOverrun(t *testing.T) {
	p := &Poller{}
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(50 * time.Microsecond))}
	p.napHit, p.gap, p.napCost = napOne, 5*time.Microsecond, time.Microsecond
	now := 10 * time.Millisecond
	p.lastPkt = now - 5*time.Microsecond
	for _, c := range []struct {
		napLen time.Duration
		naps   int
	}{{60 * time.Microsecond, 2 * napProbeEvery}, {napOverrun*50*time.Microsecond + 1, 2}} {
		p.napLen, p.napProbe = c.napLen, 0
		n := 0
		for range 2 * napProbeEvery {
			if p.napNow(now, 1) {
				n++
			}
		}
		if n != c.naps {
			t.Errorf("NapTime %v with a 50µs timer: %d naps in %d chances, want %d", c.napLen, n, 2*napProbeEvery, c.naps)
		}
	}
}

// TestNapGapDeviation: the poller naps only while the expected gap plus
// its mean deviation is shorter than a nap. Kernel batches split over two
// wake-ups (NAPI deferral) make the gaps alternate between short and
// long: their mean lies under a nap, yet most naps would come back empty.
func TestNapGapDeviation(t *testing.T) {
	p := &Poller{}
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(50 * time.Microsecond))}
	p.napHit, p.napCost, p.napLen = napOne, time.Microsecond, 60*time.Microsecond
	now := 10 * time.Millisecond
	p.lastPkt = now - 5*time.Microsecond
	for _, c := range []struct {
		gap, dev time.Duration
		nap      bool
	}{
		{20 * time.Microsecond, 5 * time.Microsecond, true},
		{20 * time.Microsecond, 40 * time.Microsecond, false}, // alternating gaps
		{59 * time.Microsecond, 0, true},
		{60 * time.Microsecond, 0, false},
	} {
		p.gap, p.dev = c.gap, c.dev
		if got := p.napNow(now, 1); got != c.nap {
			t.Errorf("gap %v, deviation %v, NapTime %v: nap %v, want %v", c.gap, c.dev, p.napLen, got, c.nap)
		}
	}
}

// TestCloseConcurrent: Close is idempotent, also when two calls race
// (Close holds running while it closes the descriptors, and a second
// Close must then report nil, not ErrRunning).
func TestCloseConcurrent(t *testing.T) {
	for i := 0; i < 2000; i++ {
		p := &Poller{}
		if err := p.initWait(); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- p.Close() }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: concurrent Close: %v", i, err)
			}
		}
	}
}

// TestThreadNap: a Config.Thread poller's nap of at most threadWait is a
// ppoll on its own thread: it does not touch the timerfd (closed here, so
// a timer nap would fail), lasts at least its length and counts. One that
// Run's end cuts short is not counted, nor is the round after it taken
// for a nap's (nappedAt).
func TestThreadNap(t *testing.T) {
	p := &Poller{cfg: Config{Thread: true}}
	p.napped = func(uintptr) bool { return p.stop.Load() || p.napOver() } // as New sets it
	if err := p.initWait(); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.tf.Close(); err != nil {
		t.Fatal(err)
	}
	p.epoch = time.Now()
	const d = 2 * time.Millisecond
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	// A signal (the runtime's preemption) may cut a nap short: then it
	// does not count, and the next try does.
	for try := 0; p.n.naps == 0; try++ {
		if try == 10 {
			t.Fatal("ten naps in a row cut short")
		}
		start := time.Now()
		if err := p.nap(0); err != nil {
			t.Fatalf("a Thread nap: %v", err)
		}
		if took := time.Since(start); p.n.naps == 1 && took < d {
			t.Errorf("a Thread nap of %v took %v", d, took)
		}
	}
	p.stop.Store(true) // Run's context ended: the nap ends cut short
	if err := p.nap(0); err != nil {
		t.Fatal(err)
	}
	if p.n.naps != 1 || p.nappedAt != 0 {
		t.Errorf("after a nap cut short: naps %d, nappedAt %v; want 1 and 0", p.n.naps, p.nappedAt)
	}
}

// TestNapPays: where both kinds of rest have been measured, the poller
// naps only while a cycle begun with a nap costs less CPU per packet
// than one begun with a sleep, but for one probe in napProbeEvery naps
// forgone, which is sampled; without samples of either it naps, and an
// explicit Config.Coalesce naps whatever the costs. A nap is forgone
// once per stretch of empty rounds: the rounds polled again after the
// first count neither as naps forgone nor towards the probe. The rows'
// per-packet costs are of the order that make bench's rxdrop rows report
// (`xdpkitbench` nap_packet_ns, sleep_packet_ns).
func TestNapPays(t *testing.T) {
	const chances = 2 * napProbeEvery
	for _, c := range []struct {
		name        string
		nap, sleep  restCost
		coalesce    time.Duration
		naps        int // of chances stretches, each of 8 empty rounds
		forgone     uint64
		sampledNext bool // the last stretch's nap is sampled
	}{
		{"kernel batches", restCost{cpu: 370 * 800, pkts: 800}, restCost{cpu: 200 * 640, pkts: 640}, 0, 2, chances - 2, true},
		{"equal", restCost{cpu: 100 * 640, pkts: 640}, restCost{cpu: 100 * 640, pkts: 640}, 0, 2, chances - 2, true},
		{"a wake-up per packet", restCost{cpu: 300 * 8000, pkts: 8000}, restCost{cpu: 2500 * 40, pkts: 40}, 0, chances, 0, false},
		{"no nap samples", restCost{}, restCost{cpu: 200 * 640, pkts: 640}, 0, chances, 0, false},
		{"nap samples without packets", restCost{cpu: 5000}, restCost{cpu: 200 * 640, pkts: 640}, 0, chances, 0, false},
		{"no sleep samples", restCost{cpu: 370 * 800, pkts: 800}, restCost{}, 0, chances, 0, false},
		{"explicit Coalesce", restCost{cpu: 370 * 800, pkts: 800}, restCost{cpu: 200 * 640, pkts: 640}, 50 * time.Microsecond, chances, 0, false},
	} {
		p := testPoller(Config{Coalesce: c.coalesce}, governor{restKind: restNone})
		p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(50 * time.Microsecond))}
		p.napHit, p.gap, p.napCost, p.napLen = napOne, 5*time.Microsecond, time.Microsecond, 60*time.Microsecond
		p.rest[restNap], p.rest[restSleep] = c.nap, c.sleep
		now := 10 * time.Millisecond
		p.lastPkt = now - 5*time.Microsecond
		n := 0
		for range chances {
			for idle := 1; idle <= 8; idle++ {
				if p.napNow(now, idle) {
					n++
					break
				}
			}
		}
		if n != c.naps || p.n.napsForgone != c.forgone || p.restForce != c.sampledNext {
			t.Errorf("%s: %d naps in %d stretches, %d forgone, probe sampled %v; want %d, %d, %v",
				c.name, n, chances, p.n.napsForgone, p.restForce, c.naps, c.forgone, c.sampledNext)
		}
	}

	// A nap forgone ends a nap's sampled cycle: what follows is the
	// sleep's way of waiting (polling again, sleeping), not the nap's.
	p := testPoller(Config{}, governor{restKind: restNone})
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(50 * time.Microsecond))}
	p.napHit, p.gap, p.napCost, p.napLen = napOne, 5*time.Microsecond, time.Microsecond, 60*time.Microsecond
	p.rest[restNap], p.rest[restSleep] = restCost{cpu: 370 * 800, pkts: 800}, restCost{cpu: 200 * 640, pkts: 640}
	now := 10 * time.Millisecond
	p.lastPkt = now - 5*time.Microsecond
	p.rested(restNap) // the first nap: sampled
	if p.restKind != restNap {
		t.Skip("the process's CPU clock cannot be read here")
	}
	p.restPkts = 200
	if p.napNow(now, 1) {
		t.Fatal("napped where a sleep costs less per packet")
	}
	if n := p.rest[restNap]; p.restKind != restNone || n.pkts != 800-800/restDecay+200 || n.cpu == 370*800 {
		t.Errorf("after a nap forgone: sample kind %d, nap samples %+v; want the nap's cycle ended with its 200 packets", p.restKind, n)
	}
}

// TestRested: a sampled cycle runs from one rest to the next and counts
// for the kind of rest it began with; cycles are sampled at every
// restSample'th rest of each kind, at a probe nap and while a kind has
// no samples that carried packets. Rests that alternate between the
// kinds sample both. Where the rule does not decide, nothing is sampled.
func TestRested(t *testing.T) {
	if processCPU() == 0 {
		t.Skip("the process's CPU clock cannot be read here")
	}
	p := testPoller(Config{}, governor{restKind: restNone})
	burn := func() {
		for start := processCPU(); processCPU()-start < 200*time.Microsecond; {
		}
	}
	const burnt = float64(200 * time.Microsecond)
	p.rested(restSleep) // sleep 0: sampled
	p.restPkts += 80
	burn()
	p.rested(restNap) // nap 0: ends the sleep's cycle, sampled
	if s := p.rest[restSleep]; s.pkts != 80 || s.cpu < burnt {
		t.Fatalf("the sleep's cycle: %+v, want 80 packets and at least 200µs", s)
	}
	if p.restKind != restNap {
		t.Fatalf("the first nap began no sample")
	}
	p.restPkts += 100
	burn()
	p.rested(restNap) // nap 1: ends the nap's cycle, begins none
	if s := p.rest[restNap]; s.pkts != 100 || s.cpu < burnt {
		t.Fatalf("the nap's cycle: %+v, want 100 packets and at least 200µs", s)
	}
	if p.restKind != restNone {
		t.Fatalf("the second nap began a sample")
	}
	p.restPkts += 1000
	p.rested(restSleep) // sleep 1: no sample open, none begun
	if p.rest[restSleep].pkts != 80 || p.restKind != restNone {
		t.Fatalf("the second sleep counted or began a sample: %+v, kind %d", p.rest[restSleep], p.restKind)
	}
	p.rested(restSleep) // sleep 2
	p.rested(restSleep) // sleep 3
	p.rested(restSleep) // sleep 4: sampled
	if p.restKind != restSleep || p.restPkts != 0 {
		t.Fatalf("the fifth sleep began no sample")
	}
	p.restPkts += 1
	p.rested(restSleep) // sleep 5: the sample decays the sums by 1/restDecay
	if got, want := p.rest[restSleep].pkts, 80-80.0/restDecay+1; got != want {
		t.Errorf("after a second sleep sample: %v packets, want %v", got, want)
	}
	// Sums fall all the way with cycles of one packet each.
	c := restCost{cpu: 640 * 200, pkts: 640}
	for range 400 {
		c.add(1000, 1)
	}
	if pp := c.perPacket(); pp < 990 || pp > 1010 {
		t.Errorf("after 400 cycles of 1 packet in 1µs: %v per packet, want 1µs", pp)
	}
	p.restForce = true
	p.rested(restNap) // a probe nap: sampled
	if p.restKind != restNap || p.restForce {
		t.Errorf("a probe nap began no sample")
	}

	// Naps and sleeps in turn: each kind is sampled every restSample'th time.
	p = &Poller{}
	p.rest[restNap], p.rest[restSleep] = restCost{cpu: 1, pkts: 1}, restCost{cpu: 1, pkts: 1}
	var began [restKinds]int
	for i := range 8 * restSample {
		k := restNap + i%2
		p.rested(k)
		if p.restKind == k {
			began[k]++
		}
	}
	if began[restNap] != 4 || began[restSleep] != 4 {
		t.Errorf("naps and sleeps in turn, %d of each: %d and %d samples begun, want 4 and 4", 4*restSample, began[restNap], began[restSleep])
	}

	// A clock that cannot be read (0) begins no sample and ends one
	// without counting it; one that went back ends it the same way.
	p = &Poller{}
	read := processCPU
	t.Cleanup(func() { processCPU = read })
	processCPU = func() time.Duration { return 0 }
	p.rested(restSleep)
	if p.restKind != restNone {
		t.Errorf("a sample begun with a failed clock read")
	}
	processCPU = read
	p.rested(restSleep)
	p.restPkts = 10
	processCPU = func() time.Duration { return 0 }
	p.rested(restNap)
	processCPU = read
	if s := p.rest[restSleep]; s != (restCost{}) {
		t.Errorf("a sample ended with a failed clock read counted: %+v", s)
	}
	p.rested(restSleep)
	p.restCPU0 += time.Hour
	p.restPkts = 10
	p.rested(restNap)
	if s := p.rest[restSleep]; s != (restCost{}) {
		t.Errorf("a sample whose clock went back counted: %+v", s)
	}

	for _, cfg := range []Config{{Spin: true}, {IdleRounds: 64}, {Coalesce: time.Millisecond}, {Coalesce: -1}} {
		p := testPoller(cfg, governor{restKind: restNone})
		p.rested(restSleep)
		p.rested(restNap)
		if p.restKind != restNone || p.n.clockReads != 0 {
			t.Errorf("%+v: sampled (kind %d, %d clock reads)", cfg, p.restKind, p.n.clockReads)
		}
	}
}

// TestNapSharesCPURead: a sampled nap takes its CPU-clock reading from
// before it from the caller when the caller has one (rested's), and reads
// the clock once more only after it; without one it reads it itself.
func TestNapSharesCPURead(t *testing.T) {
	defer func(f func() time.Duration) { processCPU = f }(processCPU)
	reads := 0
	processCPU = func() time.Duration {
		reads++
		return time.Duration(1000 * reads)
	}
	for _, c := range []struct {
		cpu      time.Duration
		reads    int
		wantCost time.Duration
	}{{cpu: 500, reads: 1, wantCost: 500}, {cpu: 0, reads: 2, wantCost: 1000}} {
		p := &Poller{cfg: Config{Thread: true}}
		p.napped = func(uintptr) bool { return p.stop.Load() || p.napOver() } // as New sets it
		if err := p.initWait(); err != nil {
			t.Fatal(err)
		}
		if err := p.tf.Close(); err != nil {
			t.Fatal(err)
		}
		p.epoch = time.Now()
		p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(100 * time.Microsecond))}
		// A signal may cut a Thread nap short; then it does not count.
		for try := 0; p.n.naps == 0; try++ {
			if try == 10 {
				t.Fatal("ten naps in a row cut short")
			}
			reads = 0
			if err := p.nap(c.cpu); err != nil {
				t.Fatal(err)
			}
		}
		if reads != c.reads || p.napCost != c.wantCost {
			t.Errorf("nap(%v): %d clock reads, NapCost %v; want %d and %v", c.cpu, reads, p.napCost, c.reads, c.wantCost)
		}
		p.Close()
	}
}
