package rxpath

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFlowEnter: Pollers take the flow sleep only while a P is left for
// the rest of the process: with GOMAXPROCS 2 one does and a second is
// refused, asks again only threadYield later, and takes the place once
// the first left it; with GOMAXPROCS 1 none does.
func TestFlowEnter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	if n := flowPollers.Load(); n != 0 {
		t.Fatalf("%d Pollers in the flow sleep before the test", n)
	}
	a, b := &Poller{}, &Poller{}
	defer a.flowLeave()
	defer b.flowLeave()
	if !a.flowEnter(1) || !a.flowEnter(2) {
		t.Fatal("GOMAXPROCS 2: the first Poller may not take the flow sleep")
	}
	if b.flowEnter(1) {
		t.Fatal("GOMAXPROCS 2: a second Poller took the flow sleep, leaving no P")
	}
	a.flowLeave()
	if b.flowEnter(1 + threadYield/2) {
		t.Error("a refused Poller asked again before threadYield passed")
	}
	if !b.flowEnter(1 + threadYield) {
		t.Error("a refused Poller may not take the place left")
	}
	if n := flowPollers.Load(); n != 1 {
		t.Errorf("%d Pollers counted in the flow sleep, want 1", n)
	}
	b.flowLeave()
	runtime.GOMAXPROCS(1)
	if c := (&Poller{}); c.flowEnter(1) {
		c.flowLeave()
		t.Error("GOMAXPROCS 1: a Poller took the flow sleep")
	}
	if n := flowPollers.Load(); n != 0 {
		t.Errorf("%d Pollers counted in the flow sleep after all left, want 0", n)
	}
}

// TestFlowSleepCostSlack: a flow sleep's wake-up is measured on a timerfd
// waited for in ppoll, as a socket wakes a flow sleep, not on ppoll's
// own timeout, which the kernel stretches by the thread's timer slack: on
// a thread whose slack is longer than any wake-up (flowSlack), the
// measurement stays far below it.
func TestFlowSleepCostSlack(t *testing.T) {
	const flowSlack = 50 * time.Millisecond
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatalf("PR_GET_TIMERSLACK: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(flowSlack), 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_TIMERSLACK: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
	d, err := measureFlowSleep(calSamples, calSleep)
	if err != nil {
		t.Fatal(err)
	}
	if d >= flowSlack/10 {
		t.Errorf("a flow sleep's wake-up measured as %v on a thread with %v of timer slack: the slack was measured", d, flowSlack)
	}
}
