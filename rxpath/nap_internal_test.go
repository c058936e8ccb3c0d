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
	if err := p.nap(); err != nil {
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
// meanwhile) are not taken, but for one every napProbeGap NapTimes, to
// measure again.
func TestNapOverrun(t *testing.T) {
	p := &Poller{}
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(50 * time.Microsecond))}
	p.gap, p.napCost = 5*time.Microsecond, time.Microsecond
	now := 10 * time.Millisecond
	p.lastPkt = now - 5*time.Microsecond
	for _, c := range []struct {
		napLen time.Duration
		naps   int
	}{{60 * time.Microsecond, testChances}, {napOverrun*50*time.Microsecond + 1, 2}} {
		p.napLen, p.probeAt = c.napLen, 0
		n := 0
		for i := range testChances {
			// The chances come a NapTime apart; the last one after the
			// probe gap.
			at := now + time.Duration(i)*c.napLen
			if i == testChances-1 {
				at = now + napProbeGap*c.napLen
			}
			p.lastPkt = at - 5*time.Microsecond
			if p.napNow(at) {
				n++
			}
		}
		if n != c.naps {
			t.Errorf("NapTime %v with a 50µs timer: %d naps in %d chances, want %d", c.napLen, n, testChances, c.naps)
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
	p.napCost, p.napLen = time.Microsecond, 60*time.Microsecond
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
		if got := p.napNow(now); got != c.nap {
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
