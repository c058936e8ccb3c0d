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

// sleep waits until a socket has descriptors, the Run context ends or
// the timeout passes. woke reports a wake-up by a socket; quiet, a sleep
// that ended on the timeout with no wake-up since the deadline was set
// (a deadline set by an earlier sleep may end this one sooner). The epoll
// file's deadline is set only when the one in place has passed or lies
// beyond timeout: most sleeps make no timer call.
//
// The sockets are armed in the epoll set (EPOLLIN) for a sleep and
// disarmed for a nap (see nap): an epoll_ctl call per socket when the
// poller goes from naps to sleeps or back, none while it only sleeps.
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
	if err := p.arm(true); err != nil {
		return false, false, err
	}
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

// arm sets whether the epoll set watches the sockets (EPOLLIN) or not
// (no events: the kernel's callback for a socket then returns at once,
// waking no one). Arming a socket whose ring has descriptors already
// makes the set readable at once (epoll_ctl polls it), so no packet that
// came before it is missed.
func (p *Poller) arm(on bool) error {
	if p.armed == on {
		return nil
	}
	var events uint32
	if on {
		events = unix.EPOLLIN
	}
	for _, s := range p.socks {
		fd := s.s.FD()
		if fd < 0 {
			return fmt.Errorf("rxpath: socket %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.ErrClosed)
		}
		ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
		p.c.syscalls++
		if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, fd, &ev); err != nil {
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
