package rxpath

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

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
	p.epfd, p.ep, p.armed = epfd, os.NewFile(uintptr(epfd), "rxpath-epoll"), true
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
	return nil
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
// (a deadline set by an earlier sleep may end this one sooner). While
// packets flow the poller sleeps in ppoll (threadSleep, unless
// Config.RuntimeSleep or no P would be left: see flowEnter), for at most
// threadWait, and reports such a timeout as neither; other sleeps go
// through the runtime's poller (runtimeSleep).
func (p *Poller) sleep(timeout time.Duration) (woke, quiet bool, err error) {
	if !p.cfg.RuntimeSleep && !p.threadIdle && timeout > threadWait {
		// While packets flow (one came within threadWait), ppoll where
		// a P is left for the rest (flowEnter); a starved poller's
		// short sleeps go to the runtime's poller.
		now := time.Since(p.epoch)
		if now-p.lastPkt < threadWait {
			if p.flowEnter(now) {
				woke, quiet, err = p.threadSleep(now)
				p.governor.flowWoke = woke && p.flowing
				return woke, quiet, err
			}
		} else {
			p.threadIdle = true
			p.flowLeave()
		}
	}
	woke, quiet, err = p.runtimeSleep(timeout)
	p.governor.flowWoke = false
	if woke {
		p.threadIdle = false // packets flow again: see thread.go
	}
	return woke, quiet, err
}

// runtimeSleep is sleep through the runtime's poller. The epoll file's
// deadline is set only when the one in place has passed or lies beyond
// timeout: most sleeps make no timer call. The sockets are put back into
// the epoll set for it if a nap or a busy stretch took them out (see
// disarmAfter).
func (p *Poller) runtimeSleep(timeout time.Duration) (woke, quiet bool, err error) {
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
	if err := p.arm(true); err != nil {
		return false, false, err
	}
	p.asleep()
	p.readyCalls = 0
	err = p.rc.Read(p.ready)
	p.blocked = p.readyCalls > 1 // the first check found nothing ready
	p.yielded = false
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

// asleep counts a sleep that is about to begin and publishes the
// counters, so that Stats read during the sleep are current.
func (p *Poller) asleep() {
	p.busy = 0
	p.c.sleeps++
	p.publish()
}

// arm puts the sockets into the epoll set (on) or takes them out of it.
// Out of the set, a socket has no waiter on its wait queue, so the
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
func (p *Poller) arm(on bool) error {
	if p.armed == on {
		return nil
	}
	for _, s := range p.socks {
		fd := s.s.FD()
		if fd < 0 {
			if !on {
				continue
			}
			return s.closedErr()
		}
		p.c.syscalls++
		var err error
		if on {
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
			switch err = rawEpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err {
			case unix.EEXIST:
				err = nil
			case unix.EBADF:
				return s.closedErr()
			}
		} else if err = rawEpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err == unix.ENOENT || err == unix.EBADF {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("rxpath: %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.NewSyscallError("epoll_ctl", err))
		}
	}
	p.armed = on
	return nil
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
// Poller's naps long. It is measured once per process, on first use (a
// Poller's first Run), which takes about half a millisecond, and cached.
// It is a latency, not CPU time: a Poller with Config.IdleRounds 0
// dates an arrival that woke it from a sleep in the runtime's poller that
// blocked one SleepCost before the wake-up, never polls an empty ring again for longer than
// this (Stats.SpinLimit; what a sleep costs in CPU is Stats.SleepCPU),
// sleeps after 3 of it (or 3 of its last sleeps, if longer) awake (the
// duty rule) and, with a delay budget, naps for 4 of it by default, cut
// to the budget.
func SleepCost() time.Duration {
	sleepCost.once.Do(func() { sleepCost.d = calibrate(measureSleep) })
	return sleepCost.d
}

// calibrate returns what measure gives for calSamples sleeps of calSleep,
// calFallback where it fails, clamped to [calMin, calMax].
func calibrate(measure func(n int, sleep time.Duration) (time.Duration, error)) time.Duration {
	d, err := measure(calSamples, calSleep)
	if err != nil || d <= 0 {
		d = calFallback
	}
	return min(max(d, calMin), calMax)
}

// flowSleepCost is what a flow sleep's wake-up takes on this host (see
// thread.go): measured as SleepCost is, on a timerfd, but waited for in
// ppoll(2) on the calling thread instead of through the runtime's poller
// (measureFlowSleep), once per process on first use (a Poller's first Run
// without Config.RuntimeSleep), and cached. A Poller dates an arrival
// that woke it from a flow sleep that blocked this long before the
// wake-up: dated a SleepCost before, which is longer, the idle periods
// before such arrivals would look shorter than they were, and the spin
// rule would poll through gaps it should sleep through.
func flowSleepCost() time.Duration {
	flowCost.once.Do(func() { flowCost.d = calibrate(measureFlowSleep) })
	return flowCost.d
}

// measureFlowSleep returns the lower quartile of the lateness of n
// wake-ups from a timerfd armed sleep ahead, waited for in ppoll on the
// calling thread, as a flow sleep waits for its sockets. Not ppoll's own
// timeout: the kernel stretches that by the thread's timer slack
// (PR_SET_TIMERSLACK), which a wake-up by a descriptor does not wait for.
func measureFlowSleep(n int, sleep time.Duration) (time.Duration, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return 0, os.NewSyscallError("timerfd_create", err)
	}
	defer unix.Close(fd)
	late := make([]time.Duration, 0, n)
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(sleep))}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for try := 0; len(late) < n; try++ {
		if try == 4*n {
			return 0, os.NewSyscallError("ppoll", unix.EINTR)
		}
		// Setting the timer clears its expiry count: the timerfd is
		// readable again once it fires.
		at := time.Now().Add(sleep)
		if err := unix.TimerfdSettime(fd, 0, &its, nil); err != nil {
			return 0, os.NewSyscallError("timerfd_settime", err)
		}
		switch k, e := rawPpoll(pfd, threadWait); {
		case e == unix.EINTR:
			continue // a signal, not the timer: measure again
		case e != 0:
			return 0, os.NewSyscallError("ppoll", e)
		case k == 0:
			return 0, os.NewSyscallError("ppoll", unix.ETIMEDOUT)
		}
		late = append(late, max(time.Since(at), 0))
	}
	slices.Sort(late)
	return late[n/4], nil
}

var flowCost struct {
	once sync.Once
	d    time.Duration
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
