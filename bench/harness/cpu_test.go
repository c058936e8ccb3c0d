package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestParseStat reads utime and stime after a command name that holds
// spaces and parentheses.
func TestParseStat(t *testing.T) {
	line := "4242 (xdp bench) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 123 45 0 0 20 0 3 0 99 1000 10 18446744073709551615\n"
	got, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if got != (CPUTime{User: 1.23, Sys: 0.45}) {
		t.Errorf("parseStat: %+v, want user 1.23 sys 0.45", got)
	}
	for _, bad := range []string{"", "4242 xdpbench S 1", "4242 (xdpbench) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1a 45 0"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

// TestProcExec checks that procExec reads the process CPU clock, in ns:
// the same clock as our own CLOCK_PROCESS_CPUTIME_ID (read just before
// and after), not a tick-sampled one; and that it keeps the time of a
// thread that has exited.
func TestProcExec(t *testing.T) {
	self := func() int64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return ts.Nano()
	}
	pid := os.Getpid()
	for i := 0; i < 3; i++ {
		a := self()
		x, err := procExec(pid)
		b := self()
		if err != nil {
			t.Fatal(err)
		}
		if x < a || x > b {
			t.Fatalf("procExec(self) = %d ns, not within our CLOCK_PROCESS_CPUTIME_ID %d-%d", x, a, b)
		}
	}
	// A thread that runs 20 ms of CPU, then exits (its goroutine ends
	// locked to it).
	x0, err := procExec(pid)
	if err != nil {
		t.Fatal(err)
	}
	const spin = 20_000_000
	// spinThread spins spin ns of CPU in a goroutine locked to its
	// thread and returns that time and the thread's id; the goroutine
	// then exits still locked, which ends its thread, unless that is the
	// process's main thread (tid == pid), which the runtime keeps.
	spinThread := func() (ran, tid int64) {
		done := make(chan [2]int64)
		go func() {
			runtime.LockOSThread() // never unlocked
			thread := func() int64 {
				var ts unix.Timespec
				if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
					return spin // stop spinning; the error shows below
				}
				return ts.Nano()
			}
			t0 := thread()
			n := int64(0)
			for n < spin {
				n = thread() - t0
			}
			done <- [2]int64{n, int64(unix.Gettid())}
		}()
		r := <-done
		return r[0], r[1]
	}
	var ran int64
	for try := 0; ; try++ {
		r, tid := spinThread()
		ran += r
		if tid != int64(pid) {
			// Read the clock only once the thread is gone.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); errors.Is(err, fs.ErrNotExist) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("thread %d did not exit", tid)
				}
			}
			break
		}
		if try == 3 {
			t.Fatal("the spinning goroutine ran on the main thread 4 times")
		}
	}
	x1, err := procExec(pid)
	if err != nil {
		t.Fatal(err)
	}
	if x1-x0 < ran {
		t.Errorf("procExec grew by %d ns over a thread that ran %d ns", x1-x0, ran)
	}
	// A child that has exited and been reaped has no clock.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := procExec(cmd.Process.Pid); err == nil {
		t.Errorf("procExec of reaped PID %d: no error", cmd.Process.Pid)
	}
}

// TestCPUTimeTotal: a process's total is its Exec (ns-precise), not the
// sum of its tick-sampled split; without Exec (a CPU, old results) the
// sum. sub, perM and summarize carry Exec.
func TestCPUTimeTotal(t *testing.T) {
	if got := (CPUTime{User: 0.5, Sys: 0.3, Exec: 0.72}).Total(); got != 0.72 {
		t.Errorf("Total with Exec = %v, want 0.72", got)
	}
	if got := (CPUTime{User: 0.5, Sys: 0.25, Softirq: 0.125}).Total(); got != 0.875 {
		t.Errorf("Total without Exec = %v, want 0.875", got)
	}
	d := CPUTime{User: 2, Sys: 1, Exec: 2.5}.sub(CPUTime{User: 1, Sys: 0.5, Exec: 1.25})
	if d != (CPUTime{User: 1, Sys: 0.5, Exec: 1.25}) {
		t.Errorf("sub: %+v", d)
	}
	if p := d.perM(500_000); p != (CPUTime{User: 2, Sys: 1, Exec: 2.5}) {
		t.Errorf("perM: %+v", p)
	}
	s := summarize([]XDPRun{{ProgPerM: CPUTime{Exec: 3}}, {ProgPerM: CPUTime{Exec: 1}}, {ProgPerM: CPUTime{Exec: 2}}})
	if s.ProgPerM.Total() != 2 {
		t.Errorf("summarize: median Exec %v, want 2", s.ProgPerM.Total())
	}
}

// TestSplitThreads: the busiest thread over the interval, not over the
// life of the process; a thread that started in between counts from
// zero; one that exited adds nothing.
func TestSplitThreads(t *testing.T) {
	a := map[int]threadCPU{
		1: {exec: 9e9, slices: 100}, // busy before the run, idle in it
		2: {exec: 1e9, slices: 10},
		3: {exec: 5e8, slices: 5}, // exits
	}
	a[5] = threadCPU{exec: 7e9, slices: 70} // exits; its ID is reused
	b := map[int]threadCPU{
		1: {exec: 9e9 + 2e6, slices: 120},
		2: {exec: 1e9 + 3e8, slices: 4010},
		4: {exec: 1e6, slices: 3},  // new
		5: {exec: 4e6, slices: 10}, // new, with an old ID
	}
	got := splitThreads(a, b)
	want := ThreadSplit{Threads: 4, Busiest: 0.3, Others: 0.007, Slices: 4000}
	if got.Threads != want.Threads || got.Slices != want.Slices ||
		math.Abs(got.Busiest-want.Busiest) > 1e-12 || math.Abs(got.Others-want.Others) > 1e-12 {
		t.Errorf("splitThreads = %+v, want %+v", got, want)
	}
	if _, err := parseSchedstat("1 2\n"); err == nil {
		t.Error("parseSchedstat of 2 fields: no error")
	}
	if tc, err := parseSchedstat("123 45 6\n"); err != nil || tc != (threadCPU{exec: 123, slices: 6}) {
		t.Errorf("parseSchedstat = %+v, %v", tc, err)
	}
}

// TestProcThreads reads our own threads: a thread that spins on its OS
// thread between the readings is the busiest, by about what it spun.
func TestProcThreads(t *testing.T) {
	a, err := procThreads(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	spun := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var ts unix.Timespec
		cpu := func() time.Duration {
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
			return time.Duration(ts.Nano())
		}
		c0 := cpu()
		for cpu()-c0 < 50*time.Millisecond {
		}
		spun <- cpu() - c0
	}()
	d := <-spun
	b, err := procThreads(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := splitThreads(a, b)
	if s.Threads < 2 || s.Busiest < d.Seconds() {
		t.Errorf("split %+v after a thread spun %v: want it the busiest, with at least that", s, d)
	}
}
