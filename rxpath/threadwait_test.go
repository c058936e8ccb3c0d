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
			// Packets a few milliseconds apart: once the expected gap
			// exceeds a nap, the poller waits in its thread after each.
			sent, tw := 0, uint64(0)
			send := func() rxpath.Stats {
				t.Helper()
				s0, err := b.poller.Stats()
				if err != nil {
					t.Fatal(err)
				}
				// Some milliseconds after the last packet: sent at once,
				// a packet would find the gap shorter than a nap.
				time.Sleep(2 * time.Millisecond)
				if err := snd.send(1, 64, 0, &acked, 5*time.Second); err != nil {
					t.Fatal(err)
				}
				sent++
				var last rxpath.Stats
				// Taken, and asleep again.
				waitFor(t, b.poller, fmt.Sprintf("packet %d", sent), func(st rxpath.Stats) bool {
					last = st
					return st.Packets == uint64(sent) && st.Sleeps > s0.Sleeps
				})
				return last
			}
			for tw < 2 && sent < 30 {
				tw = send().ThreadWaits
			}
			if tw < 2 {
				t.Fatalf("no thread waits after %d packets", sent)
			}
			before, _ := b.poller.Stats()
			send()
			// ThreadWaits is published after Sleeps and Wakeups: a Stats
			// call may see the new Sleeps and the old ThreadWaits.
			var after rxpath.Stats
			waitFor(t, b.poller, "the thread wait after the packet", func(st rxpath.Stats) bool {
				after = st
				return st.ThreadWaits > before.ThreadWaits
			})
			if after.ThreadWaits != before.ThreadWaits+1 || after.Wakeups != before.Wakeups+1 {
				t.Errorf("a packet during a thread wait: thread waits %d -> %d, wakeups %d -> %d; want both one more (the packet ended the wait)",
					before.ThreadWaits, after.ThreadWaits, before.Wakeups, after.Wakeups)
			}
			start := time.Now()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 250*time.Millisecond {
				t.Errorf("Run took %v to end after its context: the thread wait was not cut short", d)
			}
			if n := got.Load(); n != int64(sent) {
				t.Errorf("handled %d packets, want %d", n, sent)
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
