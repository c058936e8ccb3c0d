package rxpath_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
)

// TestThreadWait checks the sleeps that block Run's thread in epoll_wait
// (Config.ThreadWait), with GOMAXPROCS 1 (the wait keeps the P) and 2
// (an ordinary system call): after packets they are what the poller
// sleeps in, a packet ends one, and the end of Run's context ends one
// at once rather than when its timeout passes.
func TestThreadWait(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			// A long ThreadWait: a wait that Run's end did not cut short
			// would last until the bound of every sleep (500 ms).
			const wait = time.Second
			b := newBed(t, bedConfig{rx: rxpath.Config{ThreadWait: wait, IdleRounds: -1}})
			snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
			var got atomic.Int64
			stop := b.run(rxpath.HandlerFunc(func(*rxpath.Packet) { got.Add(1) }))
			var acked atomic.Int64
			// Each packet ends a thread wait: the poller receives it, comes
			// up empty and waits again.
			for i := range 3 {
				if err := snd.send(1, 64, 0, &acked, 5*time.Second); err != nil {
					t.Fatal(err)
				}
				waitFor(t, b.poller, fmt.Sprintf("packet %d", i+1), func(st rxpath.Stats) bool {
					return st.Packets == uint64(i+1) && st.ThreadWaits == uint64(i+1)
				})
			}
			st, err := b.poller.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.Wakeups < 2 {
				t.Errorf("wakeups %d, want at least 2: packets did not end thread waits (%v)", st.Wakeups, &st)
			}
			start := time.Now()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 250*time.Millisecond {
				t.Errorf("Run took %v to end after its context: the thread wait was not cut short", d)
			}
			if n := got.Load(); n != 3 {
				t.Errorf("handled %d packets, want 3", n)
			}
		})
	}
}

// TestThreadWaitOff checks that a negative Config.ThreadWait never
// blocks the thread.
func TestThreadWaitOff(t *testing.T) {
	b := newBed(t, bedConfig{rx: rxpath.Config{ThreadWait: -1, IdleRounds: -1}})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	stop := b.run(rxpath.HandlerFunc(func(*rxpath.Packet) {}))
	var acked atomic.Int64
	for i := range 3 {
		if err := snd.send(1, 64, 0, &acked, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitFor(t, b.poller, fmt.Sprintf("packet %d", i+1), func(st rxpath.Stats) bool { return st.Packets == uint64(i+1) })
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st, err := b.poller.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.ThreadWaits != 0 || st.Wakeups < 2 {
		t.Errorf("thread waits %d, wakeups %d; want 0 and at least 2", st.ThreadWaits, st.Wakeups)
	}
}

// waitFor polls p's Stats until ok holds, for up to 5 s.
func waitFor(t *testing.T, p *rxpath.Poller, what string, ok func(rxpath.Stats) bool) {
	t.Helper()
	limit := time.Now().Add(5 * time.Second)
	for {
		st, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return
		}
		if time.Now().After(limit) {
			t.Fatalf("%s: not seen in 5 s: %v", what, &st)
		}
		time.Sleep(time.Millisecond)
	}
}
