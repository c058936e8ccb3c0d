package rxpath

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

var aLongTimeAgo = time.Unix(1, 0)

// initWait creates the epoll instance that watches every socket for
// EPOLLIN and registers its descriptor with the Go runtime's poller. An
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
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return fmt.Errorf("rxpath: %s queue %d: %w", s.s.Ifname(), s.s.Queue(), os.NewSyscallError("epoll_ctl", err))
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return fmt.Errorf("rxpath: %w", os.NewSyscallError("fcntl(O_NONBLOCK)", err))
	}
	p.ep = os.NewFile(uintptr(epfd), "rxpath-epoll")
	rc, err := p.ep.SyscallConn()
	if err != nil {
		p.ep.Close()
		return fmt.Errorf("rxpath: %w", err)
	}
	p.rc = rc
	return nil
}

// sleep waits until a socket has descriptors, the Run context ends or
// the timeout passes. woke reports a wake-up by a socket (not the timeout
// or the end of the context). The epoll file's deadline is set only when
// the one in place has passed or lies beyond timeout: most sleeps make no
// timer call.
func (p *Poller) sleep(timeout time.Duration) (woke bool, err error) {
	now := time.Now()
	if p.deadline.Before(now) || p.deadline.Sub(now) > timeout {
		p.deadline = now.Add(timeout)
		_ = p.ep.SetReadDeadline(p.deadline)
	}
	if p.stop.Load() {
		// The context's AfterFunc sets stop before it sets its own
		// deadline, so checking stop after setting ours loses nothing.
		return false, nil
	}
	p.c.sleeps++
	p.publish()
	err = p.rc.Read(p.ready)
	switch {
	case p.stop.Load():
		return false, nil
	case err == nil:
		p.c.wakeups++
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	}
	return false, fmt.Errorf("rxpath: wait: %w", err)
}

// The idle rule's sleep cost: every costEvery'th sleep of a Poller with
// Config.IdleRounds 0 is timed in CPU time of its thread, from the
// decision to sleep to the wake-up, and the cost is the median of the
// last costSamples such samples.
const (
	costEvery   = 8
	costSamples = 16
)

// threadCPU reads the calling thread's CPU time and id (two system calls,
// made for one sleep in costEvery).
func threadCPU() (time.Duration, int) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, -1
	}
	return time.Duration(ts.Nano()), unix.Gettid()
}

// noteCost adds a sample of what a sleep and its wake-up cost the
// poller's thread, and sets sleepCost to the median of the samples kept.
func (p *Poller) noteCost(d time.Duration) {
	p.costs[p.ncost%costSamples] = d
	p.ncost++
	n := min(p.ncost, costSamples)
	tmp := p.costs // a copy, on the stack
	slices.Sort(tmp[:n])
	p.sleepCost = tmp[n/2]
	p.pub.sleepCost.Store(int64(p.sleepCost))
}
