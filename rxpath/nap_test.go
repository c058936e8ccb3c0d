package rxpath_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
)

// TestSleepAfterNapWakes checks that a sleep after a nap is ended by a
// readable socket: a nap takes the sockets out of the epoll set's watch
// (so that packets arriving during it wake no one), and the sleep must
// put them back, or the poller sleeps through traffic until its timeout.
func TestSleepAfterNapWakes(t *testing.T) {
	b := newBed(t, bedConfig{})
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
	// Send once the poller has gone to sleep (it counts the sleep just
	// before it waits).
	limit := time.Now().Add(5 * time.Second)
	for {
		st, err := b.poller.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Sleeps > 0 {
			break
		}
		if time.Now().After(limit) {
			t.Fatal("the poller did not go to sleep")
		}
		time.Sleep(time.Millisecond)
	}
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
	st, err := b.poller.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Naps != 1 || st.Wakeups != 1 {
		t.Errorf("naps %d, wakeups %d, want 1 and 1", st.Naps, st.Wakeups)
	}
}
