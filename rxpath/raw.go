package rxpath

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The poll loop's own system calls (a nap's timer and its expiry, the
// epoll set's arming, the process's CPU clock for NapCost) never block:
// the timerfd is non-blocking, and timerfd_settime, epoll_ctl and
// clock_gettime return at once. They go through RawSyscall, without the
// Go scheduler's system call entry and exit, as xsk's kicks do.
//
// Through Syscall they can cost far more than the call itself, in the
// runtime's sysmon thread (runtime/proc.go). While every P is idle, as
// while the poller sleeps, sysmon sleeps deeply; the next system call's
// entry wakes it (entersyscall), and sysmon, woken so, checks again every
// 20 µs for at least a millisecond. And where no other P is idle (one P:
// a process pinned to one CPU, as make bench's receivers are), sysmon
// takes a P that it finds in the same system call on two of its checks
// and hands it to another thread (retake). A poller that naps makes a
// system call after nearly every sleep, and on one CPU those threads run
// on the poller's. Command:
//
//	cd bench/harness && go run . -only xdp -modes rxdrop -match kpps -runs 3 -seconds 2 -out /tmp/ws
//
// Its per-wake-up table gave xdpkit's threads other than the poller's:
//   - 13.97 µs per wake-up at 100 kpps, and 0.02 µs with RawSyscall;
//   - 40.64 µs at 300 kpps, and 0.05 µs with RawSyscall.
//
// The receiver's CPU per packet went from 1.92 to 1.40 CPU-s/Mpkt at
// 100 kpps, and from 1.34 to 0.91 at 300 kpps. Those rows nap; the NAPI
// deferral rows, which do not, did not change.

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
