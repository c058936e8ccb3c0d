package rxpath

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRawSyscalls: the raw system calls of the poll loop return what
// their Syscall counterparts do, errors as the unix.Errno values the
// callers compare with. (Why they are raw is a cost, which make bench's
// per-wake-up table shows; a test would pass with Syscall too.)
func TestRawSyscalls(t *testing.T) {
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tfd)
	if rawReadTimer(tfd) {
		t.Error("rawReadTimer: an unarmed timer expired")
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(time.Microsecond))}
	if err := rawTimerfdSettime(tfd, &spec); err != nil {
		t.Fatalf("rawTimerfdSettime: %v", err)
	}
	// Expired once the timerfd is readable: the expiry is counted in the
	// timer's interrupt, which may run after its remaining time already
	// reads 0 (seen on an emulated CPU), so wait for POLLIN instead.
	pfd := []unix.PollFd{{Fd: int32(tfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 30_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("the 1 µs timer did not expire within 30 s")
		}
		break
	}
	if !rawReadTimer(tfd) {
		t.Error("rawReadTimer: an expired timer did not read as expired")
	}
	if rawReadTimer(tfd) {
		t.Error("rawReadTimer: the expiry count was not cleared")
	}
	if err := rawTimerfdSettime(-1, &spec); err != unix.EBADF {
		t.Errorf("rawTimerfdSettime(-1): %v, want EBADF", err)
	}

	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(epfd)
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(tfd)}
	for _, c := range []struct {
		op   int
		want error
	}{
		{unix.EPOLL_CTL_ADD, nil}, {unix.EPOLL_CTL_ADD, unix.EEXIST},
		{unix.EPOLL_CTL_DEL, nil}, {unix.EPOLL_CTL_DEL, unix.ENOENT},
	} {
		if err := rawEpollCtl(epfd, c.op, tfd, &ev); err != c.want {
			t.Errorf("rawEpollCtl(op %d): %v, want %v", c.op, err, c.want)
		}
	}
	if err := rawEpollCtl(epfd, unix.EPOLL_CTL_ADD, -1, &ev); err != unix.EBADF {
		t.Errorf("rawEpollCtl of fd -1: %v, want EBADF", err)
	}

	var ts unix.Timespec
	c0 := rawProcessCPU()
	for {
		// Spin until the kernel's own reading has moved past c0.
		if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		if ts.Nano() > c0 {
			break
		}
	}
	if c1 := rawProcessCPU(); c0 <= 0 || c1 < ts.Nano() {
		t.Errorf("rawProcessCPU: %d, then %d after the clock read %d", c0, c1, ts.Nano())
	}
}
