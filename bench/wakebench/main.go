package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wakebench:", err)
		os.Exit(1)
	}
}

const usage = "usage: wakebench -m wait|wait-thread|wait-thread-syscall FIFO N | wakebench -m wake FIFO N GAP"

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) < 4 || args[0] != "-m" {
		return errors.New(usage)
	}
	n, err := strconv.Atoi(args[3])
	if err != nil || n <= 0 {
		return fmt.Errorf("count %q: want a positive number", args[3])
	}
	switch {
	case args[1] == "wait" && len(args) == 4:
		return wait(args[2], n, stdout, stderr)
	case args[1] == "wait-thread" && len(args) == 4:
		return waitThread(args[2], n, false, stdout, stderr)
	case args[1] == "wait-thread-syscall" && len(args) == 4:
		return waitThread(args[2], n, true, stdout, stderr)
	case args[1] == "wake" && len(args) == 5:
		gap, err := time.ParseDuration(args[4])
		if err != nil || gap <= 0 || gap > time.Second {
			return fmt.Errorf("gap %q: want a duration in (0, 1s]", args[4])
		}
		return wake(args[2], n, gap)
	}
	return errors.New(usage)
}

// Result is the waiter's JSON line (the C half prints the same).
type Result struct {
	Impl        string `json:"impl"`
	Wakes       int    `json:"wakes"`
	Bytes       int    `json:"bytes"`
	CPUNs       int64  `json:"cpu_ns"`
	CtxSwitches int64  `json:"ctx_switches"`
}

// deadline is how far ahead the waiter's read deadline lies, as a
// Poller's sleeps have one (its closedWait) that most sleeps leave alone.
const deadline = 500 * time.Millisecond

// wait reads want bytes from the named pipe path, sleeping as an
// rxpath.Poller sleeps (rxpath/wait.go): on an epoll set of its own that
// watches the pipe, registered with the runtime's poller, with a read
// deadline, looking at the pipe with a raw read(2) from the readiness
// callback.
func wait(path string, want int, stdout, stderr io.Writer) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open", err)
	}
	defer unix.Close(fd)
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("epoll_create1", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(epfd)
		return os.NewSyscallError("epoll_ctl", err)
	}
	// Non-blocking before os.NewFile, which then registers it with the
	// runtime's poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return os.NewSyscallError("fcntl", err)
	}
	ep := os.NewFile(uintptr(epfd), "wakebench-epoll")
	defer ep.Close()
	rc, err := ep.SyscallConn()
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "wakebench: ready")
	var buf [4096]byte
	got, wakes := 0, 0
	var rerr error
	// read empties the pipe; it reports true (stop waiting) once want
	// bytes came or on an error, false when the pipe is empty: then
	// rc.Read parks until the epoll set is readable, and calls it again.
	// Each false counts as a wake-up (less those that ended on the
	// deadline), as each poll(2) that found the pipe readable in the C
	// half. A raw read: a syscall.Syscall here would
	// wake the runtime's sysmon thread after each sleep (entersyscall does
	// while every P is idle and sysmon sleeps), which a Poller, looking
	// at its rings in memory, does not pay.
	read := func(uintptr) bool {
		for got < want {
			r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			switch e {
			case 0:
				got += int(r)
			case unix.EAGAIN:
				wakes++
				return false
			case unix.EINTR:
			default:
				rerr = os.NewSyscallError("read", e)
				return true
			}
		}
		return true
	}
	u0, err := readUsage()
	if err != nil {
		return err
	}
	for got < want && rerr == nil {
		// As a Poller sets its deadline only when the one in place has
		// passed: a wake-up between makes no timer call.
		if err := ep.SetReadDeadline(time.Now().Add(deadline)); err != nil {
			return err
		}
		switch err := rc.Read(read); {
		case errors.Is(err, os.ErrDeadlineExceeded):
			wakes-- // the last park ended on the deadline, not readable
		case err != nil:
			return err
		}
	}
	if rerr != nil {
		return rerr
	}
	u1, err := readUsage()
	if err != nil {
		return err
	}
	res := Result{Impl: "go", Wakes: wakes, Bytes: got, CPUNs: int64(u1.cpu - u0.cpu), CtxSwitches: u1.switches - u0.switches}
	return json.NewEncoder(stdout).Encode(res)
}

// wake writes n bytes to the named pipe path, one every gap, spinning on
// the clock in between (a sleep would not wake up on time). A writer that
// falls behind (descheduled) goes on from now rather than writing the
// missed bytes back to back.
func wake(path string, n int, gap time.Duration) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	fd := int(f.Fd())
	b := []byte{1}
	next := time.Now()
	for range n {
		next = next.Add(gap)
		now := time.Now()
		for now.Before(next) {
			now = time.Now()
		}
		if now.Sub(next) > gap {
			next = now
		}
		if _, err := unix.Write(fd, b); err != nil {
			return os.NewSyscallError("write", err)
		}
	}
	return nil
}

// used is the process's CPU time (all threads) and context switches
// (voluntary and involuntary) so far.
type used struct {
	cpu      time.Duration
	switches int64
}

func readUsage() (used, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return used{}, os.NewSyscallError("clock_gettime", err)
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return used{}, os.NewSyscallError("getrusage", err)
	}
	return used{time.Duration(ts.Nano()), ru.Nvcsw + ru.Nivcsw}, nil
}
