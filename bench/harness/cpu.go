package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// clkTck is USER_HZ, the unit of /proc/stat and /proc/PID/stat (100 on
// every Linux architecture Go supports).
const clkTck = 100

// CPUTime is CPU time in seconds: user (with nice), system, and softirq
// (a CPU's /proc/stat; a process has no softirq column), in clock ticks
// (10 ms) at the source, or in µs for a finished process's rusage; for a
// process also Exec, its on-CPU time read in ns.
type CPUTime struct {
	User    float64 `json:"user"`
	Sys     float64 `json:"sys"`
	Softirq float64 `json:"softirq,omitempty"`
	// Exec is a process's on-CPU time, all its threads, live and
	// exited: the kernel's sum_exec_runtime in ns (procExec), or a
	// finished process's rusage (its user + sys add up to the same sum,
	// in µs). 0 for a CPU, and in results written before it existed.
	Exec float64 `json:"exec,omitempty"`
}

func (a CPUTime) sub(b CPUTime) CPUTime {
	return CPUTime{a.User - b.User, a.Sys - b.Sys, a.Softirq - b.Softirq, a.Exec - b.Exec}
}

// Total is Exec where it was measured, else user + sys + softirq (a CPU,
// or results written before Exec existed). A process's user/sys split is
// tick-sampled; its Exec is not: at 100 kpps for 2 s one tick is 0.05
// CPU-s per million packets.
func (a CPUTime) Total() float64 {
	if a.Exec != 0 {
		return a.Exec
	}
	return a.User + a.Sys + a.Softirq
}

// perM scales a to CPU-seconds per million of frames.
func (a CPUTime) perM(frames uint64) CPUTime {
	if frames == 0 {
		return CPUTime{}
	}
	k := 1e6 / float64(frames)
	return CPUTime{a.User * k, a.Sys * k, a.Softirq * k, a.Exec * k}
}

// cpuStat reads every CPU's line of /proc/stat (cpu0, cpu1, ...).
func cpuStat() ([]CPUTime, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []CPUTime
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 8 || !strings.HasPrefix(fl[0], "cpu") || fl[0] == "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq
		v := make([]float64, 7)
		for i := range v {
			n, err := strconv.ParseUint(fl[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/stat: %q: %w", sc.Text(), err)
			}
			v[i] = float64(n) / clkTck
		}
		out = append(out, CPUTime{User: v[0] + v[1], Sys: v[2], Softirq: v[6]})
	}
	return out, sc.Err()
}

// procStat reads a process's user and system time (all its threads) from
// /proc/PID/stat.
func procStat(pid int) (CPUTime, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPUTime{}, err
	}
	t, err := parseStat(string(b))
	if err != nil {
		return t, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return t, nil
}

// parseStat reads utime and stime (clock ticks) from a /proc/PID/stat
// line.
func parseStat(s string) (CPUTime, error) {
	// The command name is in parentheses and may hold spaces and ')':
	// fields start after the last ')'. utime and stime are fields 14
	// and 15.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return CPUTime{}, fmt.Errorf("no command name: %q", s)
	}
	fl := strings.Fields(s[i+1:])
	if len(fl) < 13 {
		return CPUTime{}, fmt.Errorf("%d fields after the command name: %q", len(fl), s)
	}
	u, err1 := strconv.ParseUint(fl[11], 10, 64)
	st, err2 := strconv.ParseUint(fl[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return CPUTime{}, fmt.Errorf("utime, stime: %w", err)
	}
	return CPUTime{User: float64(u) / clkTck, Sys: float64(st) / clkTck}, nil
}

// procCPU reads a running process's CPU time: the user/sys split from
// /proc/PID/stat (ticks) and the total in ns (procExec).
func procCPU(pid int) (CPUTime, error) {
	t, err := procStat(pid)
	if err != nil {
		return t, err
	}
	ns, err := procExec(pid)
	if err != nil {
		return t, err
	}
	t.Exec = float64(ns) / 1e9
	return t, nil
}

// processClock is the clock ID of process pid's CPU clock, as the
// kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) encodes it.
func processClock(pid int) int32 {
	const cpuclockSched = 2
	return int32(^pid)<<3 | cpuclockSched
}

// procExec reads process pid's on-CPU time in ns from its CPU clock
// (clock_getcpuclockid(3)): sum_exec_runtime of every thread, live and
// exited, including the running slice of a thread on a CPU now. Unlike
// a sum over /proc/PID/task/*/schedstat it does not lose the threads
// that exit between two readings. Any process in our PID namespace may
// be read.
func procExec(pid int) (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(processClock(pid), &ts); err != nil {
		return 0, os.NewSyscallError(fmt.Sprintf("clock_gettime(CPU clock of %d)", pid), err)
	}
	return ts.Nano(), nil
}

// cpuDelta is b - a per CPU.
func cpuDelta(a, b []CPUTime) []CPUTime {
	out := make([]CPUTime, min(len(a), len(b)))
	for i := range out {
		out[i] = b[i].sub(a[i])
	}
	return out
}

// threadCPU is one thread's scheduler figures from
// /proc/PID/task/TID/schedstat: its on-CPU time in ns and how many times
// it was put on a CPU (timeslices: each wake-up, and each return after
// being preempted).
type threadCPU struct {
	exec   int64
	slices int64
}

// procThreads reads every live thread of process pid.
func procThreads(pid int) (map[int]threadCPU, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int]threadCPU, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // exited meanwhile
		}
		t, err := parseSchedstat(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s/%d/schedstat: %w", dir, tid, err)
		}
		out[tid] = t
	}
	return out, nil
}

// parseSchedstat reads a schedstat line: on-CPU ns, run-queue wait ns,
// timeslices.
func parseSchedstat(s string) (threadCPU, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return threadCPU{}, fmt.Errorf("%d fields, want 3: %q", len(f), s)
	}
	e, err1 := strconv.ParseInt(f[0], 10, 64)
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return threadCPU{}, err
	}
	return threadCPU{exec: e, slices: n}, nil
}

// ThreadSplit divides a program's on-CPU time over a run between its
// busiest thread (for xdpbench its only one; for xdpkitbench usually the
// one that runs the poller, which the Go runtime does not tie to a
// thread) and the others (the runtime's sysmon and idle Ms, a goroutine
// that wakes now and then). Seconds; Slices is how many times the
// busiest thread was put on a CPU: its wake-ups, from sleeps and naps
// alike, and its returns after preemption.
type ThreadSplit struct {
	Threads int     `json:"threads"`
	Busiest float64 `json:"busiest_s"`
	Others  float64 `json:"others_s"`
	Slices  int64   `json:"busiest_slices"`
}

// splitThreads compares two readings of procThreads. A thread seen only
// in b started in between and counts from zero; one seen only in a
// exited, and what it ran after a is lost (procExec's total has it).
func splitThreads(a, b map[int]threadCPU) ThreadSplit {
	var s ThreadSplit
	var total, busiest int64
	for tid, t1 := range b {
		t0 := a[tid]
		d := t1.exec - t0.exec
		if d < 0 || t1.slices < t0.slices {
			// The thread ID was reused by a thread that started in
			// between: count it from zero.
			t0, d = threadCPU{}, t1.exec
		}
		total += d
		if d > busiest {
			busiest, s.Slices = d, t1.slices-t0.slices
		}
	}
	s.Threads = len(b)
	s.Busiest, s.Others = float64(busiest)/1e9, float64(total-busiest)/1e9
	return s
}
