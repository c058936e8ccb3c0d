package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitThread reads want bytes from the named pipe path, sleeping as an
// rxpath.Poller sleeps while packets flow
// (rxpath/thread.go): in ppoll(2) on the pipe, on the goroutine's thread,
// through RawSyscall (syscall false) with a 5 ms timeout, yielding the P
// (runtime.Gosched) every 4 ms. With syscall true the ppoll goes through
// unix.Syscall instead: the runtime's system call entry and exit, which
// rxpath does not use (see rxpath/thread.go); kept to show why.
func waitThread(path string, want int, syscall bool, stdout, stderr io.Writer) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open", err)
	}
	defer unix.Close(fd)
	fmt.Fprintln(stderr, "wakebench: ready")
	var buf [4096]byte
	got, wakes := 0, 0
	u0, err := readUsage()
	if err != nil {
		return err
	}
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	yieldAt := time.Now()
	for got < want {
		r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		switch e {
		case 0:
			got += int(r)
			continue
		case unix.EAGAIN:
		case unix.EINTR:
			continue
		default:
			return os.NewSyscallError("read", e)
		}
		if now := time.Now(); now.Sub(yieldAt) >= 4*time.Millisecond {
			runtime.Gosched()
			yieldAt = now
		}
		// The kernel writes the time left into the timeout: a fresh one
		// for every call.
		ts := unix.NsecToTimespec(int64(5 * time.Millisecond))
		var n uintptr
		if syscall {
			n, _, e = unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		} else {
			n, _, e = unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		}
		if e != 0 && e != unix.EINTR {
			return os.NewSyscallError("ppoll", e)
		}
		if e == 0 && n > 0 {
			wakes++
		}
	}
	u1, err := readUsage()
	if err != nil {
		return err
	}
	impl := "go-thread"
	if syscall {
		impl = "go-thread-syscall"
	}
	res := Result{Impl: impl, Wakes: wakes, Bytes: got, CPUNs: int64(u1.cpu - u0.cpu), CtxSwitches: u1.switches - u0.switches}
	return json.NewEncoder(stdout).Encode(res)
}
