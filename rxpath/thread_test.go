package rxpath_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
)

// TestThread: a default poller is woken from ppoll on its own thread
// while packets flow (ThreadWakeups), also across garbage collections
// (whose stop ends a ppoll with EINTR); once they stop it sleeps in the
// runtime's poller (no more often than an idle poller with RuntimeSleep:
// closedWait), is woken from there by the next packet and goes back to
// ppoll for the flow after it; a socket closed under it ends Run with
// os.ErrClosed. Every datagram arrives. With GOMAXPROCS 1 no P would be
// left for the rest of the process, so it never sleeps in ppoll: the
// sender is this process's goroutine, waiting on a timer between
// datagrams, which would otherwise run only when a ppoll timed out, one
// timeout per datagram on top of its sleep.
func TestThread(t *testing.T) {
	for _, procs := range []int{2, 1} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			testThread(t, procs)
		})
	}
}

func testThread(t *testing.T, procs int) {
	b := newBed(t, bedConfig{})
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
	var got atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.poller.Run(ctx, rxpath.HandlerFunc(func(*rxpath.Packet) { got.Add(1) })) }()
	defer func() {
		cancel()
		<-done
	}()
	waitAsleep(t, b.poller)

	// flow sends n datagrams one at a time, each once the one before
	// arrived and 200 µs later, so that the poller sleeps between them
	// (well within threadWait, 5 ms, unless the machine stalls).
	flow := func(n int, gc bool) {
		t.Helper()
		for i := range n {
			want := got.Load() + 1
			if err := snd.send(1, 64, 0, nil, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			waitCount(&got, want, 5*time.Second)
			if got.Load() != want {
				t.Fatalf("datagram %d of %d did not arrive: %s", i, n, ptr(b.stats(t)))
			}
			if gc && i%50 == 25 {
				runtime.GC()
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	const n = 300
	flow(n, true)
	st1 := b.stats(t)
	switch {
	case procs == 1 && (st1.ThreadWakeups != 0 || st1.Sleeps >= 3*n/2):
		t.Errorf("GOMAXPROCS 1: %d wake-ups from ppoll, %d sleeps for %d datagrams; want none from ppoll, about one sleep each: %s", st1.ThreadWakeups, st1.Sleeps, n, &st1)
	case procs > 1 && st1.ThreadWakeups < n/4:
		// Most of the flow's sleeps were ppolls woken by the socket; a
		// stall of the sender beyond threadWait sends the poller to the
		// runtime's poller for one packet, and a slow machine may stall
		// often.
		t.Errorf("%d of %d datagrams woke the poller from ppoll: %s", st1.ThreadWakeups, n, &st1)
	}

	// Idle: the runtime's poller, one sleep per closedWait (500 ms).
	time.Sleep(100 * time.Millisecond)
	st2 := b.stats(t)
	time.Sleep(time.Second)
	st3 := b.stats(t)
	if d := st3.Sleeps - st2.Sleeps; d > 4 {
		t.Errorf("%d sleeps in an idle second: the idle poller still sleeps in ppoll (%s)", d, &st3)
	}

	// A datagram wakes it from the runtime's poller (Stats shows it once
	// the poller published: poll; a datagram that came between two
	// sleeps is taken without a wake-up: send another), and the next
	// flow is in ppoll again.
	var st4 rxpath.Stats
	for try := 0; ; try++ {
		flow(1, false)
		for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
			if st4 = b.stats(t); st4.Wakeups != st3.Wakeups || time.Now().After(deadline) {
				break
			}
		}
		if st4.Wakeups != st3.Wakeups {
			break
		}
		if try == 2 {
			t.Fatalf("three datagrams after the idle second woke no sleep: %s", &st4)
		}
	}
	flow(40, false)
	if st5 := b.stats(t); procs > 1 && st5.ThreadWakeups-st4.ThreadWakeups < 10 {
		t.Errorf("%d of 40 datagrams after an idle spell woke the poller from ppoll: %s", st5.ThreadWakeups-st4.ThreadWakeups, &st5)
	}

	// A socket closed while the poller sleeps ends Run.
	if err := b.socks[0].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the deferred wait
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Run after its socket closed: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run goes on 10 s after its socket closed")
	}
}

func ptr(s rxpath.Stats) *rxpath.Stats { return &s }
