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
// receiver sleeps in poll(2). The call goes through RawSyscall: through
// Syscall, its entry wakes the runtime's sysmon thread (see raw.go), which
// then costs the receiver more than the runtime's poller does
// (bench/wakebench -m wait-thread-syscall against -m wait-thread). So the
// goroutine keeps its P while it sleeps, and the Go scheduler counts it as
// running:
//
//   - The scheduler's hold on a running goroutine is its preemption
//     signal (sysmon's, after 10 ms without a reschedule; a garbage
//     collection's, at each of its stops), which ends a ppoll with EINTR
//     (ppoll is never restarted); the goroutine yields at its next
//     function call. Each ppoll lasts at most threadWait, so that even
//     where no signal is sent (GODEBUG=asyncpreemptoff=1) each of a
//     collection's stops waits at most that long for it, and so does the
//     end of Run's context (the Poller looks at it after each ppoll).
//     Before each ppoll the Poller yields (runtime.Gosched) if it has not
//     for threadYield, so that sysmon has no cause to signal it.
//   - While a P is busy, sysmon wakes every 10 ms (it sleeps for good
//     only once every P is idle): about 100 short wake-ups a second on
//     some CPU for as long as packets flow.
//   - Other goroutines get that P only at those yields, or from another
//     P: a Thread Poller wants a CPU of its own, as a C receiver has.
//     With GOMAXPROCS 1 (a process pinned to one CPU, as make bench runs
//     xdpkitbench; a container of one CPU) there is no other P: the
//     process's other goroutines run only at those yields and when a
//     ppoll ends, on a packet or after threadWait. One that makes the
//     Poller's next packet (a sender in the same process) then costs a
//     ppoll's timeout per packet (TestThread without its GOMAXPROCS(2),
//     under GOMAXPROCS=1: 602 sleeps and no wake-up from ppoll for 300
//     datagrams).
//
// Packets flow while the last one came within threadWait: once none has
// (whatever ended the ppolls: their timeouts or signals), the sleeps go
// through the runtime's poller, as without Thread, so that an idle Poller
// holds no P and keeps sysmon asleep, until a socket wakes one of them.
// So do the short sleeps of a starved Poller (no frame for a Fill ring).
// A nap no longer than threadWait, while packets flow, is a ppoll on no
// descriptor for the nap's length; a longer one waits on the timerfd
// through the runtime's poller.
const (
	threadWait  = 5 * time.Millisecond
	threadYield = 4 * time.Millisecond
)

// threadYieldNow yields the P if the goroutine has held it for
// threadYield, now being time.Since(p.epoch) (see Config.Thread), and
// reports whether it did.
func (p *Poller) threadYieldNow(now time.Duration) bool {
	if now-p.yieldAt >= threadYield {
		runtime.Gosched()
		p.yieldAt = now
		return true
	}
	return false
}

// threadSleep is sleep for a Thread Poller while packets flow: ppoll on
// every socket, for at most threadWait; now is time.Since(p.epoch). A
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
	yielded := p.threadYieldNow(now)
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

// threadNap is a Thread Poller's nap of d <= threadWait: ppoll on no
// descriptor. It reports false if the nap was cut short (Run's end, a
// signal): then it says nothing of a nap's length or cost.
func (p *Poller) threadNap(d time.Duration) bool {
	p.threadYieldNow(time.Since(p.epoch))
	p.c.syscalls++
	_, e := rawPpoll(nil, d)
	return e != unix.EINTR && !p.stop.Load()
}

// rawPpoll is ppoll(2) through RawSyscall (see Config.Thread), with no
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
