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
// tells apart (Wakeups).
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
	// Wait for the sleep after the burst.
	st0, err := b.poller.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var st1 rxpath.Stats
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st1, err = b.poller.Stats(); err != nil {
			t.Fatal(err)
		}
		if st1.Sleeps > st0.Sleeps {
			break
		}
	}
	if st1.Sleeps == st0.Sleeps {
		t.Fatalf("no sleep after the burst: %s", &st1)
	}
	if err := snd.send(1, 64, 0, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	const after = burst + 4 // one datagram per flow
	waitCount(&h.got, after, 5*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st2, err := b.poller.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("burst: %d rounds, %d sleeps, %d syscalls; after: %s", st1.Rounds, st1.Sleeps, st1.Syscalls, &st2)
	if h.got.Load() != after {
		t.Fatalf("received %d of %d datagrams", h.got.Load(), after)
	}
	if st2.Wakeups == st1.Wakeups {
		t.Errorf("the datagrams after the burst did not wake the poller (wake-ups %d -> %d): its sleep ran to the timeout", st1.Wakeups, st2.Wakeups)
	}
}
