package rxpath

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The flow sleep: while packets flow (unless Config.RuntimeSleep), Run
// sleeps in ppoll(2) on the thread that runs it.
//
// The runtime's poller parks the goroutine, looks for other work, waits in
// epoll_pwait (twice: a non-blocking look from the scheduler, then the
// blocking wait) and, woken, readies and schedules the goroutine again.
// The flow sleep is one ppoll(2) on the sockets, as a C receiver sleeps in
// poll(2) (make bench's Wake-up cost table measures both ways against
// poll(2)). The call goes through RawSyscall: through Syscall, its entry
// wakes the runtime's sysmon thread (see raw.go), which then costs the
// receiver more than the runtime's poller does (bench/wakebench -m
// wait-thread-syscall against -m wait-thread). So the goroutine keeps its
// P while it sleeps, and the Go scheduler counts it as running, as it
// counts a goroutine that computes:
//
//   - The flow sleep holds a P, so a Poller takes it only while a P is
//     left for the rest of the process: while fewer of the process's
//     Pollers are in it than GOMAXPROCS less one (flowEnter). With
//     GOMAXPROCS 1 no Poller takes it, and every sleep is the runtime's:
//     the runtime polls the network only from a free P (or from sysmon,
//     every 10 ms), so a goroutine woken by a socket or a pipe, such as a
//     reader of the packets in the same process, would otherwise wait up
//     to a ppoll's timeout or sysmon's next look. Package mq keeps
//     GOMAXPROCS above its number of queues, so each of its Pollers has one.
//   - A goroutine made ready while the Poller holds its P runs on another
//     P (an idle P also runs the others' due timers and polls the
//     network); where every other P is busy it waits, as it would for a
//     goroutine that computes, until the Poller yields (runtime.Gosched)
//     before a ppoll, which it does once it has not for threadYield, so
//     that sysmon has no cause to preempt it either.
//   - A garbage collection's stop sends the preemption signal, which ends
//     a ppoll with EINTR (ppoll is never restarted); the goroutine stops
//     at its next function call. Each ppoll lasts at most threadWait, so
//     that even where no signal is sent (GODEBUG=asyncpreemptoff=1) a stop
//     waits at most that long for it, and so does the end of Run's context
//     (the Poller looks at it after each ppoll).
//   - While a P is busy, sysmon wakes every 10 ms (it sleeps for good only
//     once every P is idle): about 100 short wake-ups a second on some CPU
//     for as long as packets flow.
//
// Packets flow while the last one came within threadWait: once none has
// (whatever ended the ppolls: their timeouts or signals), the Poller
// leaves the flow sleep and sleeps through the runtime's poller, so that
// an idle Poller holds no P and keeps sysmon asleep, until a socket wakes
// one of them. So do the short sleeps of a starved Poller (no frame for a
// Fill ring). A nap waits on the timerfd through the runtime's poller
// even in the flow sleep: the kernel stretches a ppoll's own timeout by
// the thread's timer slack (50 µs by default), longer than a nap's
// budget may allow.
const (
	threadWait  = 5 * time.Millisecond
	threadYield = 4 * time.Millisecond
	// threadRan: a yield that took longer ran something else (or the
	// thread lost its CPU): the sleep after it says nothing of what a
	// sleep costs.
	threadRan = 2 * time.Microsecond
)

// flowPollers counts the process's Pollers in the flow sleep.
var flowPollers atomic.Int32

// flowEnter reports whether the Poller may sleep in the flow sleep, now
// being time.Since(p.epoch): it is in it, or it takes a place while
// fewer Pollers than GOMAXPROCS less one are (a refusal is asked again
// no sooner than threadYield later: GOMAXPROCS takes the scheduler's
// lock). Once in, it looks again at every yield (flowYield), in case
// GOMAXPROCS fell.
func (p *Poller) flowEnter(now time.Duration) bool {
	if p.flowing {
		return true
	}
	if p.flowRetry != 0 && now < p.flowRetry {
		return false
	}
	if n := flowPollers.Add(1); int(n) >= runtime.GOMAXPROCS(0) {
		flowPollers.Add(-1)
		p.flowRetry = max(now+threadYield, 1)
		return false
	}
	p.flowing, p.flowRetry = true, 0
	return true
}

// flowLeave gives up the Poller's place in the flow sleep, if it has one.
func (p *Poller) flowLeave() {
	if p.flowing {
		p.flowing = false
		flowPollers.Add(-1)
	}
}

// flowYield yields the P before a flow sleep if the goroutine has not for
// threadYield, now being time.Since(p.epoch), and reports whether other
// work ran meanwhile (the yield took threadRan or longer), and whether
// the Poller is still in the flow sleep: after a yield it leaves it
// where GOMAXPROCS fell to the Pollers in it.
func (p *Poller) flowYield(now time.Duration) (ran, flowing bool) {
	if now-p.yieldAt < threadYield {
		return false, true
	}
	t0 := time.Since(p.epoch)
	runtime.Gosched()
	p.yieldAt = time.Since(p.epoch)
	if int(flowPollers.Load()) >= runtime.GOMAXPROCS(0) {
		p.flowLeave()
		p.flowRetry = p.yieldAt + threadYield
		return true, false
	}
	return p.yieldAt-t0 >= threadRan, true
}

// threadSleep is the flow sleep: ppoll on every socket, for at most
// threadWait; now is time.Since(p.epoch). If a yield first finds that
// GOMAXPROCS fell, it sleeps through the runtime's poller instead. A
// ppoll that a signal ended (EINTR: the scheduler's preemption) or that
// timed out reports neither woke nor quiet.
func (p *Poller) threadSleep(now time.Duration) (woke, quiet bool, err error) {
	if p.stop.Load() {
		return false, false, nil
	}
	// A runtime sleep before this one armed the sockets in the epoll set.
	if err := p.arm(false); err != nil {
		return false, false, err
	}
	p.pfds = p.pfds[:0]
	for _, s := range p.socks {
		fd := s.s.FD()
		if fd < 0 {
			return false, false, s.closedErr()
		}
		p.pfds = append(p.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	yielded, flowing := p.flowYield(now)
	if !flowing {
		return p.runtimeSleep(threadWait)
	}
	p.c.syscalls++
	p.asleep()
	// A sleep that finds a packet already there does not wait; one that
	// ran other goroutines first (a yield) says nothing of what a sleep
	// costs.
	p.blocked, p.yielded = !p.anyReady(), yielded
	n, e := rawPpoll(p.pfds, threadWait)
	switch {
	case p.stop.Load(), e == unix.EINTR, e == 0 && n == 0:
		return false, false, nil
	case e != 0:
		return false, false, fmt.Errorf("rxpath: wait: %w", os.NewSyscallError("ppoll", e))
	}
	for i, s := range p.socks {
		if p.pfds[i].Revents&unix.POLLNVAL != 0 {
			return false, false, s.closedErr()
		}
	}
	p.c.wakeups++
	p.c.threadWakeups++
	return true, false, nil
}

// rawPpoll is ppoll(2) through RawSyscall (see the flow sleep), with no
// signal mask. The kernel writes the time left into the timeout: it is
// made afresh for every call.
func rawPpoll(fds []unix.PollFd, timeout time.Duration) (int, unix.Errno) {
	ts := unix.NsecToTimespec(int64(timeout))
	var p unsafe.Pointer
	if len(fds) > 0 {
		p = unsafe.Pointer(&fds[0])
	}
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(p), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return int(n), e
}
