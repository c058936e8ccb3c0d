package rxpath

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The poll loop's own system calls (a nap's timer and its expiry, the
// epoll set's arming, the process's CPU clock for NapCost) wait for no
// event: the timerfd is non-blocking, and timerfd_settime and
// clock_gettime return at once. epoll_ctl may sleep briefly on kernel
// mutexes (the set's, which the runtime's netpoller holds while it polls
// the set, and epoll's nesting check), none of which waits on Go code.
// They go through RawSyscall, without the Go scheduler's system call
// entry and exit, as xsk's kicks do.
//
// Through Syscall they cost a wake-up of another thread on the poller's
// CPU. While every P is idle, as while the poller sleeps or naps, the
// runtime's sysmon thread sleeps deeply; a system call's entry wakes it
// (reentersyscall in runtime/proc.go), and sysmon, woken so, checks again
// every 20 µs until it finds every P idle again. A poller that naps makes
// a system call after nearly every sleep. make bench's per-wake-up table
// shows it as the receiver's other threads (cd bench/harness && go run .
// -only xdp -modes rxdrop -match kpps -runs 3 -seconds 2 -out /tmp/ws):
// through Syscall those threads cost several µs per wake-up at 100 and
// 300 kpps, through RawSyscall next to nothing. No test can tell
// a Syscall from a RawSyscall here: TestRawSyscalls checks the results.

func rawTimerfdSettime(fd int, spec *unix.ItimerSpec) error {
	_, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(fd), 0, uintptr(unsafe.Pointer(spec)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawReadTimer reads a non-blocking timerfd's expiry count: ok if it had
// expired.
func rawReadTimer(fd int) bool {
	var b [8]byte
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return e == 0 && n == uintptr(len(b))
}

func rawEpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawProcessCPU is the process's CPU time (every thread), 0 if it cannot
// be read.
func rawProcessCPU() int64 {
	var ts unix.Timespec
	_, _, e := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_PROCESS_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0)
	if e != 0 {
		return 0
	}
	return ts.Nano()
}
