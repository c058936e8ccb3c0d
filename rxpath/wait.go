package rxpath

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var aLongTimeAgo = time.Unix(1, 0)

// initWait creates the epoll instance that watches every socket for
// EPOLLIN and registers its descriptor with the Go runtime's poller, and
// the timerfd that naps wait on. An
// epoll descriptor is itself readable while one of its sockets is, so one
// goroutine can wait for all of them through the runtime (no OS thread
// parked in epoll_wait, no goroutine per socket) and a wake-up allocates
// nothing. The readiness callback only looks at the RX rings.
func (p *Poller) initWait() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("rxpath: %w", os.NewSyscallError("epoll_create1", err))
	}
	for _, s := range p.socks {
		fd := s.s.FD()
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)} // armed: see arm
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return fmt.Errorf("rxpath: %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.NewSyscallError("epoll_ctl", err))
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return fmt.Errorf("rxpath: %w", os.NewSyscallError("fcntl(O_NONBLOCK)", err))
	}
	p.epfd, p.ep, p.armed = epfd, os.NewFile(uintptr(epfd), "rxpath-epoll"), armPoller
	rc, err := p.ep.SyscallConn()
	if err != nil {
		p.ep.Close()
		return fmt.Errorf("rxpath: %w", err)
	}
	p.rc = rc
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		p.ep.Close()
		return fmt.Errorf("rxpath: %w", os.NewSyscallError("timerfd_create", err))
	}
	p.tfd, p.tf = tfd, os.NewFile(uintptr(tfd), "rxpath-timerfd")
	if p.trc, err = p.tf.SyscallConn(); err != nil {
		p.ep.Close()
		p.tf.Close()
		return fmt.Errorf("rxpath: %w", err)
	}
	if err := p.initThreadWait(); err != nil {
		p.ep.Close()
		p.tf.Close()
		return err
	}
	return nil
}

// initThreadWait creates the epoll instance of thread waits and the
// eventfd in it that Run's end writes to, with Config.ThreadWait only.
func (p *Poller) initThreadWait() error {
	p.tep, p.stopfd = -1, -1
	if p.cfg.ThreadWait <= 0 {
		return nil
	}
	tep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("rxpath: %w", os.NewSyscallError("epoll_create1", err))
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(tep)
		return fmt.Errorf("rxpath: %w", os.NewSyscallError("eventfd", err))
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}
	if err := unix.EpollCtl(tep, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		unix.Close(tep)
		unix.Close(efd)
		return fmt.Errorf("rxpath: %w", os.NewSyscallError("epoll_ctl", err))
	}
	p.tep, p.stopfd = tep, efd
	return nil
}

// closeFD closes a descriptor of the Poller's own, if it has one.
func closeFD(fd int) error {
	if fd < 0 {
		return nil
	}
	return os.NewSyscallError("close", unix.Close(fd))
}

// While the sockets are in the epoll set, the kernel's every RX flush
// (sk_data_ready: one per NAPI poll that received for a socket, on the
// CPU that runs the driver) walks the socket's wait queue into this epoll
// instance and on into the runtime's, under their locks with interrupts
// off. A poller that receives without sleeping does not need that, and
// on a saturated receive CPU it is a cost per packet (perf record -C 0
// on the generator's CPU during make bench's fwd 64 B row, C's forwarder
// against xdpkit's: sock_def_readable and the unlock after it). So the
// poller takes its sockets out of the set for every nap and once
// disarmAfter rounds have taken packets since the last sleep, and puts
// them back before its next sleep: one EPOLL_CTL_DEL per socket per nap
// or busy stretch, one EPOLL_CTL_ADD per sleep that follows one, none for
// a poller that only sleeps. (Adding a socket polls it, and for a socket
// that also transmits with need_wakeup the kernel's poll may send its
// pending TX frames then.)
const disarmAfter = 32

// sleep waits until a socket has descriptors, the Run context ends or
// the timeout passes. woke reports a wake-up by a socket; quiet, a sleep
// that ended on the timeout with no wake-up since the deadline was set
// (a deadline set by an earlier sleep may end this one sooner). The epoll
// file's deadline is set only when the one in place has passed or lies
// beyond timeout: most sleeps make no timer call.
//
// The sockets are put back into the epoll set for a sleep if a nap or a
// busy stretch took them out (see disarmAfter).
func (p *Poller) sleep(timeout time.Duration) (woke, quiet bool, err error) {
	now := time.Now()
	if p.deadline.Before(now) || p.deadline.Sub(now) > timeout {
		p.deadline = now.Add(timeout)
		p.deadlineWakeups = p.c.wakeups
		_ = p.ep.SetReadDeadline(p.deadline)
	}
	if p.stop.Load() {
		// The context's AfterFunc sets stop before it sets its own
		// deadline, so checking stop after setting ours loses nothing.
		return false, false, nil
	}
	if err := p.arm(armPoller); err != nil {
		return false, false, err
	}
	p.busy = 0
	p.c.sleeps++
	p.publish()
	err = p.rc.Read(p.ready)
	switch {
	case p.stop.Load():
		return false, false, nil
	case err == nil:
		p.c.wakeups++
		return true, false, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, p.c.wakeups == p.deadlineWakeups, nil
	}
	return false, false, fmt.Errorf("rxpath: wait: %w", err)
}

// The epoll set the sockets are in (Poller.armed): neither (a nap or a
// busy stretch), the runtime's (ep: a sleep in the runtime's poller) or
// that of thread waits (tep).
const (
	armNone = iota
	armPoller
	armThread
)

// arm moves the sockets into the epoll set to (see armNone), out of the
// one they are in. Out of every set, a socket has no waiter on its wait queue, so the
// kernel's RX flush skips the wake-up path altogether (an entry left in
// with no events would still be walked under the queue's lock). Adding a
// socket whose ring has descriptors already makes the set readable at
// once (epoll_ctl polls it), so no packet that came before is missed. A
// socket closed meanwhile is out of the set already (the kernel drops a
// closed file's registrations; epoll matches file and number, so a
// reused number is not removed either) and ends Run at the next arming
// with os.ErrClosed. (One closed, and its number reused, between FD and
// epoll_ctl would put a stranger in the set: it could only wake the
// poller, which then finds the socket closed.)
func (p *Poller) arm(to int) error {
	if p.armed == to {
		return nil
	}
	from, into := p.armFD(p.armed), p.armFD(to)
	for _, s := range p.socks {
		fd := s.s.FD()
		if fd < 0 {
			if into < 0 {
				continue
			}
			return fmt.Errorf("rxpath: socket %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.ErrClosed)
		}
		if from >= 0 {
			p.c.syscalls++
			if err := unix.EpollCtl(from, unix.EPOLL_CTL_DEL, fd, nil); err != nil && err != unix.ENOENT && err != unix.EBADF {
				return fmt.Errorf("rxpath: %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.NewSyscallError("epoll_ctl", err))
			}
		}
		if into < 0 {
			continue
		}
		p.c.syscalls++
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		switch err := unix.EpollCtl(into, unix.EPOLL_CTL_ADD, fd, &ev); err {
		case nil, unix.EEXIST:
		case unix.EBADF:
			return fmt.Errorf("rxpath: socket %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.ErrClosed)
		default:
			return fmt.Errorf("rxpath: %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.NewSyscallError("epoll_ctl", err))
		}
	}
	p.armed = to
	return nil
}

// armFD is the epoll descriptor of the set a (see armNone), -1 for none.
func (p *Poller) armFD(a int) int {
	switch a {
	case armPoller:
		return p.epfd
	case armThread:
		return p.tep
	}
	return -1
}

// threadWaitNow reports whether the sleep after an empty round begun at
// now is a thread wait (waitThread): while packets come in bursts
// further apart than a nap lasts (NapTime) but flow, that is while the
// expected gap to the next packet and the silence since the last one are
// shorter than Config.ThreadWait. Packets closer together are taken by
// naps and spins, and there thread waits were found to cost more than
// they save (make bench's rxdrop 64 B at 100 kpps row, cause not found),
// while bursts further apart cost a wake-up each (its rows with NAPI
// deferral).
func (p *Poller) threadWaitNow(now time.Duration) bool {
	w := p.cfg.ThreadWait
	return w > 0 && p.lastPkt > 0 && p.gap >= p.napLen && p.gap < w && now-p.lastPkt < w
}

// waitThread sleeps as sleep does, for at most Config.ThreadWait, by
// blocking the OS thread in epoll_wait on tep (an epoll instance the Go
// runtime does not watch), as a C receiver blocks in poll(2). It reports
// whether a socket (rather than the timeout or Run's end) ended it.
//
// A wake-up through the runtime's poller costs a pass through its
// scheduler: the goroutine parks, the thread looks for other work, polls
// the network without blocking and then blocking (two epoll_wait calls,
// here on an epoll descriptor nested in the runtime's), takes its P back
// and resumes the goroutine. Here it costs one epoll_wait. With
// GOMAXPROCS 1 the call bypasses the runtime's system call bookkeeping
// (RawSyscall), so the goroutine keeps the only P while the thread
// sleeps: an ordinary blocking call would let the runtime's monitor take
// the P back after 20 µs and, finding no idle P nor spinning thread,
// start another thread to look for work, at every wait (and keep the
// monitor waking every 20 µs). Other goroutines then run only when the
// poller yields: after a thread wait that ends ThreadWait or more after
// its last yield (runtime.Gosched), and when a signal interrupts the wait (the runtime's preemption, every 10 ms
// while it holds the P, or a stop-the-world, sends one). With more Ps
// the wait is an ordinary system call and leaves its P to others.
func (p *Poller) waitThread(timeout time.Duration) (woke bool, err error) {
	if p.stop.Load() {
		return false, nil
	}
	if err := p.arm(armThread); err != nil {
		return false, err
	}
	p.busy = 0
	p.c.sleeps++
	p.c.threadWaits++
	p.publish()
	// epoll_wait counts milliseconds: round up, so that a sleep lasts
	// at least its timeout.
	ms := uintptr((min(timeout, p.cfg.ThreadWait) + time.Millisecond - 1) / time.Millisecond)
	for {
		var n uintptr
		var errno unix.Errno
		if p.procs == 1 {
			n, _, errno = unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.tep), uintptr(unsafe.Pointer(&p.evs[0])), uintptr(len(p.evs)), ms, 0, 0)
			// Let the other goroutines run: after a signal (a
			// preemption request) at once, else at most every
			// ThreadWait (a yield is a pass through the scheduler).
			if t := time.Since(p.epoch); errno == unix.EINTR || t >= p.yieldAt {
				p.yieldAt = t + p.cfg.ThreadWait
				runtime.Gosched()
			}
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.tep), uintptr(unsafe.Pointer(&p.evs[0])), uintptr(len(p.evs)), ms, 0, 0)
		}
		switch {
		case p.stop.Load():
			return false, nil
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return false, fmt.Errorf("rxpath: wait: %w", os.NewSyscallError("epoll_pwait", errno))
		case n > 0:
			p.c.wakeups++
			return true, nil
		}
		return false, nil
	}
}

// wakeThread ends a thread wait: it makes stopfd readable.
func (p *Poller) wakeThread() {
	if p.stopfd < 0 {
		return
	}
	one := [8]byte{1}
	_, _ = unix.Write(p.stopfd, one[:])
}

// drainStop makes stopfd unreadable again, for the next Run.
func (p *Poller) drainStop() {
	if p.stopfd < 0 {
		return
	}
	var b [8]byte
	_, _ = unix.Read(p.stopfd, b[:])
}

// Calibration of SleepCost: sleeps of calSleep on a timerfd, calSamples
// of them.
const (
	calSamples = 16
	calSleep   = 20 * time.Microsecond
	// calFallback is SleepCost where the host cannot be measured (no
	// timerfd): the order of what it measures on a 2-vCPU VM.
	calFallback = 20 * time.Microsecond
)

var sleepCost struct {
	once sync.Once
	d    time.Duration
}

// SleepCost returns how long a goroutine's sleep in the Go runtime's
// network poller and its wake-up take on this host, beyond the sleep
// itself: the lower quartile, over 16 sleeps of 20 µs on a timerfd
// watched through the runtime's poller (the path a Poller sleeps on), of
// the time from the timer's expiry to the goroutine running again,
// clamped to [2 µs, 200 µs]. The lower quartile, not the median, and the
// clamp keep a measurement taken while the host is busy from making a
// Poller spin for milliseconds after every burst. It is measured once per
// process, on first use (a Poller's first Run), which takes about half a
// millisecond, and cached. A Poller with Config.IdleRounds 0 polls an
// empty ring again only while the next packet is expected sooner than
// this.
func SleepCost() time.Duration {
	sleepCost.once.Do(func() {
		d, err := measureSleep(calSamples, calSleep)
		if err != nil || d <= 0 {
			d = calFallback
		}
		sleepCost.d = min(max(d, calMin), calMax)
	})
	return sleepCost.d
}

// Bounds of SleepCost.
const (
	calMin = 2 * time.Microsecond
	calMax = 200 * time.Microsecond
)

// measureSleep returns the lower quartile of the lateness of n wake-ups
// from a timerfd armed sleep ahead, through the runtime's poller.
func measureSleep(n int, sleep time.Duration) (time.Duration, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return 0, os.NewSyscallError("timerfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "rxpath-timerfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	late := make([]time.Duration, 0, n)
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(sleep))}
	for range n {
		// Setting the timer clears its expiry count: the runtime's
		// edge-triggered poller wakes us when it fires again.
		at := time.Now().Add(sleep)
		if err := unix.TimerfdSettime(fd, 0, &its, nil); err != nil {
			return 0, os.NewSyscallError("timerfd_settime", err)
		}
		if err := rc.Read(func(uintptr) bool { return !time.Now().Before(at) }); err != nil {
			return 0, err
		}
		late = append(late, time.Since(at))
	}
	slices.Sort(late)
	return late[n/4], nil
}
