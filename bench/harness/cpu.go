package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clkTck is USER_HZ, the unit of /proc/stat and /proc/PID/stat (100 on
// every Linux architecture Go supports).
const clkTck = 100

// CPUTime is CPU time in seconds: user (with nice), system, and softirq
// (a CPU's /proc/stat; a process has no softirq column).
type CPUTime struct {
	User    float64 `json:"user"`
	Sys     float64 `json:"sys"`
	Softirq float64 `json:"softirq,omitempty"`
}

func (a CPUTime) sub(b CPUTime) CPUTime {
	return CPUTime{a.User - b.User, a.Sys - b.Sys, a.Softirq - b.Softirq}
}

// Total is user + sys + softirq.
func (a CPUTime) Total() float64 { return a.User + a.Sys + a.Softirq }

// perM scales a to CPU-seconds per million of frames.
func (a CPUTime) perM(frames uint64) CPUTime {
	if frames == 0 {
		return CPUTime{}
	}
	k := 1e6 / float64(frames)
	return CPUTime{a.User * k, a.Sys * k, a.Softirq * k}
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
	// The command name is in parentheses and may hold spaces: fields
	// start after the last ')'. utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return CPUTime{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	fl := strings.Fields(s[i+1:])
	if len(fl) < 13 {
		return CPUTime{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	u, err1 := strconv.ParseUint(fl[11], 10, 64)
	st, err2 := strconv.ParseUint(fl[12], 10, 64)
	if err1 != nil || err2 != nil {
		return CPUTime{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return CPUTime{User: float64(u) / clkTck, Sys: float64(st) / clkTck}, nil
}

// cpuDelta is b - a per CPU.
func cpuDelta(a, b []CPUTime) []CPUTime {
	out := make([]CPUTime, min(len(a), len(b)))
	for i := range out {
		out[i] = b[i].sub(a[i])
	}
	return out
}
