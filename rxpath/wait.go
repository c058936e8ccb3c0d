package rxpath

import (
	"errors"
	"fmt"
	"os"
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

// sleep waits until a socket has descriptors, the Run context ends or,
// with timeout > 0, the timeout passes. woke reports a wake-up by a
// socket (not the timeout or the end of the context).
func (p *Poller) sleep(timeout time.Duration) (woke bool, err error) {
	if timeout > 0 {
		_ = p.ep.SetReadDeadline(time.Now().Add(timeout))
	}
	if p.stop.Load() {
		return false, nil
	}
	p.c.sleeps++
	p.publish()
	err = p.rc.Read(p.ready)
	if timeout > 0 {
		// The context's AfterFunc sets stop before it sets its own
		// deadline, so checking stop after clearing ours loses nothing.
		_ = p.ep.SetReadDeadline(time.Time{})
	}
	switch {
	case p.stop.Load():
		return false, nil
	case err == nil:
		p.c.wakeups++
		return true, nil
	case timeout > 0 && errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	}
	return false, fmt.Errorf("rxpath: wait: %w", err)
}
