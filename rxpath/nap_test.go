package rxpath_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
)

// TestSleepAfterNapWakes checks that a sleep after a nap is ended by a
// readable socket: a nap takes the sockets out of the epoll set's watch
// (so that packets arriving during it wake no one), and the sleep must
// put them back, or the poller sleeps through traffic until its timeout.
//
// With and without Config.RuntimeSleep: the nap and the sleep after it
// (no packet yet) are in the runtime's poller either way.
func TestSleepAfterNapWakes(t *testing.T) {
	for _, thread := range []bool{false, true} {
		t.Run(fmt.Sprintf("thread=%v", thread), func(t *testing.T) { testSleepAfterNapWakes(t, thread) })
	}
}

func testSleepAfterNapWakes(t *testing.T, thread bool) {
	b := newBed(t, bedConfig{rx: rxpath.Config{RuntimeSleep: !thread}})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	type result struct {
		woke bool
		err  error
	}
	done := make(chan result, 1)
	go func() {
		woke, err := rxpath.NapThenSleep(b.poller, 10*time.Microsecond, 5*time.Second)
		done <- result{woke, err}
	}()
	waitAsleep(t, b.poller)
	var acked atomic.Int64
	if err := snd.send(1, 64, 0, &acked, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.woke {
		t.Error("the sleep after a nap ended on its timeout, not on the packet: the sockets were not watched again")
	}
	st := b.stats(t)
	if st.Naps != 1 || st.Wakeups != 1 {
		t.Errorf("naps %d, wakeups %d, want 1 and 1", st.Naps, st.Wakeups)
	}
}

// TestQuietSleep checks what makes the poller look for an interface
// that went away (a getsockopt per socket): only a sleep that ended on
// its timeout with no wake-up since that deadline was set. A sleep keeps
// the deadline an earlier one set when it comes sooner than its own, so
// a sleep after a wake-up can end on a deadline set before the packet
// came: that interval was not quiet.
func TestQuietSleep(t *testing.T) {
	b := newBed(t, bedConfig{})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	type result struct {
		woke, quiet bool
		err         error
	}
	const wait = 3 * time.Second
	done := make(chan result, 1)
	go func() {
		woke, quiet, err := rxpath.Sleep(b.poller, wait) // sets the deadline
		done <- result{woke, quiet, err}
	}()
	waitAsleep(t, b.poller) // the Fill ring has frames then
	var acked atomic.Int64
	if err := snd.send(1, 64, 0, &acked, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.woke {
		t.Fatalf("first sleep: woke %v, err %v; want woken by the packet", r.woke, r.err)
	}
	// The next sleep keeps the deadline the first one set (it is sooner
	// than wait from now) and ends on it, with no packet.
	woke, quiet, err := rxpath.Sleep(b.poller, wait)
	if err != nil {
		t.Fatal(err)
	}
	if woke || quiet {
		t.Errorf("second sleep: woke %v, quiet %v; want ended on the first sleep's deadline, not quiet (a packet came after it was set)", woke, quiet)
	}
	// A sleep with a deadline of its own and no packet is quiet.
	woke, quiet, err = rxpath.Sleep(b.poller, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if woke || !quiet {
		t.Errorf("third sleep: woke %v, quiet %v; want quiet", woke, quiet)
	}
}

// waitAsleep returns once p has gone to sleep (it counts the sleep just
// before it waits, after filling its Fill rings).
func waitAsleep(t *testing.T, p *rxpath.Poller) {
	t.Helper()
	limit := time.Now().Add(5 * time.Second)
	for {
		st, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Sleeps > 0 {
			return
		}
		if time.Now().After(limit) {
			t.Fatal("the poller did not go to sleep")
		}
		time.Sleep(time.Millisecond)
	}
}
