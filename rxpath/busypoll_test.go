package rxpath_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestBusyPoll receives through sockets created for busy polling
// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET) with
// Config.BusyPoll: every datagram arrives, and every round began with one
// recvfrom on each socket, the call that drives the device's NAPI from the
// poller's goroutine.
func TestBusyPoll(t *testing.T) {
	const timeout = 20 * time.Microsecond
	b := newBed(t, bedConfig{
		queues: 2,
		xsk:    xsk.Config{PreferBusyPoll: true, BusyPollTimeout: timeout, BusyPollBudget: 64},
		rx:     rxpath.Config{BusyPoll: true},
	})
	for _, s := range b.socks {
		// The kernel reads these two back (not the budget).
		prefer, err := unix.GetsockoptInt(s.FD(), unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL)
		if err != nil {
			t.Fatal(err)
		}
		usecs, err := unix.GetsockoptInt(s.FD(), unix.SOL_SOCKET, unix.SO_BUSY_POLL)
		if err != nil {
			t.Fatal(err)
		}
		if prefer != 1 || usecs != int(timeout/time.Microsecond) {
			t.Fatalf("queue %d: SO_PREFER_BUSY_POLL %d, SO_BUSY_POLL %d µs; want 1, %d", s.Queue(), prefer, usecs, timeout/time.Microsecond)
		}
	}
	const flows, perFlow = 4, 5000
	snd := newSender(t, b.b, b.pair.A.AddrPort4(port), flows)
	chk := newChecker(snd.srcPorts(), 1000)
	stop := b.run(rxpath.HandlerFunc(chk.check)) // returns once Run sleeps: the Fill rings are full
	start := time.Now()
	// At most 200 in flight: below veth's 256-entry XDP ring.
	err := snd.send(perFlow, 1000, 200, &chk.got, 30*time.Second)
	for chk.got.Load()+chk.bad.Load() < flows*perFlow && time.Since(start) < 30*time.Second && err == nil {
		time.Sleep(time.Millisecond)
	}
	if rerr := stop(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := b.stats(t)
	t.Logf("%d datagrams in %v: %s", chk.got.Load(), time.Since(start), &st)
	if m := chk.err.Load(); m != nil {
		t.Fatalf("%d bad datagrams, first: %s", chk.bad.Load(), *m)
	}
	if got := chk.got.Load(); got != flows*perFlow {
		t.Fatalf("received %d datagrams, want %d", got, flows*perFlow)
	}
	// Every round starts with a recvfrom on each socket (the socket
	// counts its recvfrom calls; Stats counts rounds up to the last
	// publish, so never more than were made).
	if st.Rounds == 0 || st.Syscalls < st.Rounds*uint64(len(b.socks)) {
		t.Errorf("%d rounds, %d system calls: want a recvfrom per socket per round", st.Rounds, st.Syscalls)
	}
	for i, s := range b.socks {
		if k := s.Counters().KicksRX; k < st.Rounds {
			t.Errorf("queue %d: %d recvfrom calls in %d rounds", i, k, st.Rounds)
		}
		if x := st.Sockets[i].XDP; x.RXDropped != 0 || x.RXInvalidDescs != 0 || x.RXRingFull != 0 {
			t.Errorf("queue %d: kernel dropped packets: %+v", i, x)
		}
	}
}

// TestSleepCost: the host's sleep cost is measured once, cached, and
// within its documented bounds [2 µs, 200 µs] however busy the host is.
func TestSleepCost(t *testing.T) {
	d := rxpath.SleepCost()
	if d < 2*time.Microsecond || d > 200*time.Microsecond {
		t.Fatalf("SleepCost() = %v", d)
	}
	if d2 := rxpath.SleepCost(); d2 != d {
		t.Fatalf("SleepCost() = %v, then %v: not cached", d, d2)
	}
	t.Logf("a sleep in the runtime's poller and its wake-up: %v", d)
}
