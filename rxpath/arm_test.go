package rxpath_test

import (
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
)

// TestWakeAfterBusy: a poller that received for a long stretch without
// sleeping takes its sockets out of its epoll set (disarmAfter rounds in
// a row that took packets); its next sleep must still be ended by the
// next packet, not by the sleep's timeout (closedWait), which Stats
// tells apart (Wakeups). It fails with the re-arm in sleep removed.
func TestWakeAfterBusy(t *testing.T) {
	// Rounds of at most 4 packets, and a million empty rounds before a
	// sleep: the burst below takes hundreds of rounds with no sleep in
	// between.
	b := newBed(t, bedConfig{rx: rxpath.Config{Weight: 4, Budget: 4, IdleRounds: 1_000_000}})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 4)
	h := &roundCounter{}
	stop := b.run(h)
	const burst = 2000
	if err := snd.send(burst/4, 64, 200, &h.got, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	waitCount(&h.got, burst, 5*time.Second)
	if h.got.Load() != burst {
		t.Fatalf("received %d of %d datagrams", h.got.Load(), burst)
	}
	st0 := b.stats(t)
	if st0.Syscalls == 0 {
		t.Fatalf("the burst made no epoll_ctl call: the sockets stayed in the epoll set: %s", &st0)
	}
	// A sleep can end on a deadline an earlier one set, and the poller
	// then polls a million empty rounds, in which a datagram is taken
	// without a wake-up. So each try first lets every earlier deadline
	// pass (they lie at most closedWait, 500 ms, ahead), then waits for a
	// sleep to begin (its deadline 500 ms ahead) and sends one datagram
	// per flow at once. A try can still miss on a machine that stalls
	// for half a second; three misses in a row fail. With the sockets
	// left out of the set no sleep ever wakes, and every try misses.
	got := int64(burst)
	for try := 0; ; try++ {
		time.Sleep(600 * time.Millisecond)
		st1 := b.stats(t)
		var st rxpath.Stats
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			st = b.stats(t)
			if st.Sleeps > st1.Sleeps {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no sleep after the burst: %s", &st)
			}
		}
		if err := snd.send(1, 64, 0, nil, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		got += 4 // one datagram per flow
		waitCount(&h.got, got, 5*time.Second)
		if h.got.Load() != got {
			t.Fatalf("received %d of %d datagrams", h.got.Load(), got)
		}
		st2 := b.stats(t)
		t.Logf("try %d: before %s; after %s", try, &st, &st2)
		if st2.Wakeups > st.Wakeups {
			break // a datagram ended a sleep
		}
		if try == 2 {
			t.Fatalf("the datagrams after the burst did not wake the poller (wake-ups %d -> %d): its sleep ran to the timeout", st.Wakeups, st2.Wakeups)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
