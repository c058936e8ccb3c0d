package mq

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNoCPU is returned when no CPU is left to run a queue on.
var ErrNoCPU = errors.New("mq: no CPU to run on")

// AllowedCPUs returns the CPUs the calling thread may run on
// (sched_getaffinity), in increasing order.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	return cpusOf(&set), nil
}

func cpusOf(set *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// AssignCPUs picks a CPU for each of n queues: one per queue, in order,
// from the CPUs the process may run on minus exclude. With more queues
// than CPUs the CPUs are used again in turn (queues then share a core).
func AssignCPUs(n int, exclude []int) ([]int, error) {
	allowed, err := AllowedCPUs()
	if err != nil {
		return nil, err
	}
	return assign(n, allowed, exclude)
}

func assign(n int, allowed, exclude []int) ([]int, error) {
	var cpus []int
	for _, c := range allowed {
		if !slices.Contains(exclude, c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("%w: CPUs %v, excluded %v", ErrNoCPU, allowed, exclude)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = cpus[i%len(cpus)]
	}
	return out, nil
}

// PinThread locks the calling goroutine to its OS thread and restricts
// that thread to cpu (sched_setaffinity). It returns the thread's id. The
// goroutine should not unlock: a pinned thread handed back to the runtime
// would carry its affinity to other goroutines; a goroutine that ends
// locked ends its thread with it.
func PinThread(cpu int) (tid int, err error) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return 0, fmt.Errorf("mq: pin to CPU %d: %w", cpu, os.NewSyscallError("sched_setaffinity", err))
	}
	return unix.Gettid(), nil
}

// ThreadCPUs returns the CPUs thread tid of this process may run on.
func ThreadCPUs(tid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	return cpusOf(&set), nil
}

// ParseCPUList parses a CPU list as the kernel writes it ("0-3,6,8-9").
func ParseCPUList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a > 4096 {
			return nil, fmt.Errorf("mq: CPU list %q: bad entry %q", s, part)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}
