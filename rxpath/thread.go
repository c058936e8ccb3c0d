package rxpath

import (
	"fmt"
	"os"
	"runtime"
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
//   - A goroutine made ready while the Poller holds its P runs on another
//     P if one is idle (an idle P also runs the others' due timers and
//     polls the network); where every other P is busy it waits, as it
//     would for a goroutine that computes. The Poller yields
//     (runtime.Gosched, about 0.1 µs when nothing else is ready) before a
//     ppoll once it has not for threadYield, so that sysmon has no cause
//     to preempt it.
//   - With GOMAXPROCS 1 there is no other P: the Poller yields before
//     every ppoll, so that a goroutine that is ready runs first and the
//     P's due timers run, and each ppoll lasts at most threadPollOneP. A
//     goroutine made ready during a ppoll (its timer, the network, a
//     system call's return) runs when the ppoll ends, on a packet or at
//     most that late: a sender in the same process that waits on a timer
//     sends at most that late (TestThread/GOMAXPROCS=1).
//   - A garbage collection's stop sends the preemption signal, which ends
//     a ppoll with EINTR (ppoll is never restarted); the goroutine stops
//     at its next function call. Each ppoll lasts at most threadPoll, so
//     that even where no signal is sent (GODEBUG=asyncpreemptoff=1) a stop
//     waits at most that long for it, and so does the end of Run's context
//     (the Poller looks at it after each ppoll).
//   - While a P is busy, sysmon wakes every 10 ms (it sleeps for good only
//     once every P is idle): about 100 short wake-ups a second on some CPU
//     for as long as packets flow.
//
// Packets flow while the last one came within threadWait: once none has
// (whatever ended the ppolls: their timeouts or signals), the sleeps go
// through the runtime's poller, so that an idle Poller holds no P and
// keeps sysmon asleep, until a socket wakes one of them. So do the short
// sleeps of a starved Poller (no frame for a Fill ring). A nap no longer
// than threadPoll, while packets flow, is a ppoll on no descriptor for the
// nap's length; a longer one waits on the timerfd through the runtime's
// poller.
const (
	threadWait     = 5 * time.Millisecond
	threadYield    = 4 * time.Millisecond
	threadPollOneP = time.Millisecond
	// threadRan: a yield that took longer ran something else (or the
	// thread lost its CPU): the sleep after it says nothing of what a
	// sleep costs.
	threadRan = 2 * time.Microsecond
)

// threadPoll is the longest ppoll of the flow sleep: threadWait, or
// threadPollOneP with GOMAXPROCS 1 (oneP), where goroutines made ready
// during it wait for its end.
func threadPoll(oneP bool) time.Duration {
	if oneP {
		return threadPollOneP
	}
	return threadWait
}

// oneP reports whether GOMAXPROCS is 1.
func oneP() bool { return runtime.GOMAXPROCS(0) == 1 }

// threadYield yields the P before a flow sleep if GOMAXPROCS is 1 (oneP)
// or the goroutine has not yielded for threadYield, now being
// time.Since(p.epoch), and reports whether other work ran meanwhile (the
// yield took threadRan or longer).
func (p *Poller) threadYield(now time.Duration, oneP bool) bool {
	if !oneP && now-p.yieldAt < threadYield {
		return false
	}
	runtime.Gosched()
	p.yieldAt = time.Since(p.epoch)
	return p.yieldAt-now >= threadRan
}

// threadSleep is the flow sleep: ppoll on every socket, for at most
// threadPoll; now is time.Since(p.epoch). A
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
	one := oneP()
	yielded := p.threadYield(now, one)
	p.c.syscalls++
	p.asleep()
	// A sleep that finds a packet already there does not wait; one that
	// ran other goroutines first (a yield) says nothing of what a sleep
	// costs.
	p.blocked, p.yielded = !p.anyReady(), yielded
	n, e := rawPpoll(p.pfds, threadPoll(one))
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

// threadNap is a nap of d <= threadPoll while packets flow: ppoll on no
// descriptor, after a yield. It reports false if the nap was cut short (Run's end, a
// signal): then it says nothing of a nap's length or cost.
func (p *Poller) threadNap(d time.Duration) bool {
	p.threadYield(time.Since(p.epoch), oneP())
	p.c.syscalls++
	_, e := rawPpoll(nil, d)
	return e != unix.EINTR && !p.stop.Load()
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
