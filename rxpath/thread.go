package rxpath

import (
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Config.Thread: while packets flow, Run sleeps in ppoll(2) on the thread
// that runs it.
//
// The runtime's poller parks the goroutine, looks for other work, waits in
// epoll_pwait (twice: a non-blocking look from the scheduler, then the
// blocking wait) and, woken, readies and schedules the goroutine again.
// A Thread Poller instead sleeps in one ppoll(2) on its sockets, as a C
// receiver sleeps in poll(2). The call goes through RawSyscall: through Syscall, its entry
// wakes the runtime's sysmon thread (see raw.go), which then costs the
// receiver more than the runtime's poller does (bench/wakebench -m
// waitpoll against -m waitrawpoll). So the goroutine keeps its P while it
// sleeps, and the Go scheduler counts it as running:
//
//   - The scheduler's hold on a running goroutine is its preemption
//     signal (sysmon's after 10 ms on the CPU, a garbage collection's
//     stop), which ends ppoll with EINTR; the goroutine yields at its next
//     function call. Each ppoll lasts at most threadWait, so that a
//     collection waits no longer than that even where no signal is sent
//     (GODEBUG=asyncpreemptoff=1), nor does the end of Run's context
//     (the Poller looks at it after each ppoll), and the Poller yields (runtime.Gosched)
//     every threadYield of sleeping, so that sysmon has no cause to
//     signal it.
//   - While a P is busy, sysmon wakes every 10 ms (it sleeps for good
//     only once every P is idle): about 100 short wake-ups a second on
//     some CPU for as long as packets flow.
//   - Other goroutines get that P only at those yields, or from another
//     P: a Thread Poller wants a CPU of its own, as a C receiver has.
//
// A ppoll that times out (no packet for threadWait) ends the flow: the
// sleeps that follow go through the runtime's poller, as without Thread,
// so that an idle Poller holds no P and keeps sysmon asleep, until a
// socket wakes one of them. A nap, while packets flow, is a ppoll on no
// descriptor for the nap's length.
const (
	threadWait  = 5 * time.Millisecond
	threadYield = 4 * time.Millisecond
)

// threadYieldNow yields the P if the goroutine has held it for
// threadYield (see Config.Thread).
func (p *Poller) threadYieldNow() {
	if now := time.Now(); now.Sub(p.yieldAt) >= threadYield {
		runtime.Gosched()
		p.yieldAt = now
	}
}

// threadSleep is sleep for a Thread Poller while packets flow: ppoll on
// every socket, for at most threadWait. A ppoll that a
// signal ended (EINTR: the scheduler's preemption) reports neither woke
// nor quiet; one that timed out, quiet if timeout was no longer than
// threadWait, and otherwise that the flow ended (threadIdle).
func (p *Poller) threadSleep(timeout time.Duration) (woke, quiet bool, err error) {
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
			return false, false, fmt.Errorf("rxpath: socket %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.ErrClosed)
		}
		p.pfds = append(p.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	p.threadYieldNow()
	p.busy = 0
	p.c.sleeps++
	p.publish()
	n, e := rawPpoll(p.pfds, min(timeout, threadWait))
	switch {
	case p.stop.Load():
		return false, false, nil
	case e == unix.EINTR:
		return false, false, nil
	case e != 0:
		return false, false, fmt.Errorf("rxpath: wait: %w", os.NewSyscallError("ppoll", e))
	case n == 0:
		if timeout > threadWait {
			p.threadIdle = true
			return false, false, nil
		}
		return false, true, nil
	}
	for i, s := range p.socks {
		if p.pfds[i].Revents&unix.POLLNVAL != 0 {
			return false, false, fmt.Errorf("rxpath: socket %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.ErrClosed)
		}
	}
	p.c.wakeups++
	p.c.threadWakeups++
	return true, false, nil
}

// threadNap is a Thread Poller's nap: ppoll on no descriptor, for the
// nap's length. It reports false if Run's end came meanwhile.
func (p *Poller) threadNap() bool {
	p.threadYieldNow()
	_, _ = rawPpoll(nil, time.Duration(p.napSpec.Value.Nano()))
	return !p.stop.Load()
}

// rawPpoll is ppoll(2) through RawSyscall (see Config.Thread), with no
// signal mask.
func rawPpoll(fds []unix.PollFd, timeout time.Duration) (int, unix.Errno) {
	ts := unix.NsecToTimespec(int64(timeout))
	var p unsafe.Pointer
	if len(fds) > 0 {
		p = unsafe.Pointer(&fds[0])
	}
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(p), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return int(n), e
}
