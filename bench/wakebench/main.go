package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wakebench:", err)
		os.Exit(1)
	}
}

const usage = "usage: wakebench -m wait FIFO N | wakebench -m wake FIFO N GAP"

func run(args []string) error {
	if len(args) < 4 || args[0] != "-m" {
		return errors.New(usage)
	}
	n, err := strconv.Atoi(args[3])
	if err != nil || n <= 0 {
		return fmt.Errorf("count %q: want a positive number", args[3])
	}
	switch {
	case args[1] == "wait" && len(args) == 4:
		return wait(args[2], n)
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

func wait(path string, want int) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open", err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wakebench: ready")
	var buf [4096]byte
	got, wakes := 0, 0
	var rerr error
	// read empties the pipe; it reports true (stop waiting) once want
	// bytes came or on an error, false when the pipe is empty: then
	// rc.Read parks until the pipe is readable, and calls it again. Each
	// false counts as a wake-up, as each poll(2) in the C half.
	read := func(fd uintptr) bool {
		for got < want {
			r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			switch {
			case e == unix.EAGAIN:
				wakes++ // rc.Read parks until the pipe is readable
				return false
			case e == unix.EINTR:
				continue
			case e != 0:
				rerr = os.NewSyscallError("read", e)
				return true
			}
			got += int(r)
		}
		return true
	}
	c0, s0 := cpu(), switches()
	if err := rc.Read(read); err != nil {
		return err
	}
	res := Result{Impl: "go", Wakes: wakes, Bytes: got, CPUNs: int64(cpu() - c0), CtxSwitches: switches() - s0}
	if rerr != nil {
		return rerr
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func wake(path string, n int, gap time.Duration) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	b := []byte{1}
	next := time.Now()
	for range n {
		next = next.Add(gap)
		for time.Now().Before(next) {
		}
		if _, err := unix.Write(fd, b); err != nil {
			return os.NewSyscallError("write", err)
		}
	}
	return nil
}

func cpu() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func switches() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}
