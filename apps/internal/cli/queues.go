package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/xdpkit/xdpkit/mq"
)

// QueueFlags are the multi-queue flags shared by the programs: -queues
// (a count or a list) next to the older single -q, and the CPUs to pin
// the queues' threads to.
type QueueFlags struct {
	Queue   int    // -q: the one queue when -queues is not given
	Queues  string // -queues: N (queues 0..N-1) or a list "0,2-3"
	CPUs    string // -cpus: CPUs to pin to, one per queue in turn, or "none"
	Exclude string // -exclude-cpus: CPUs the default choice skips
}

// Register adds -q/-queue, -queues, -cpus and -exclude-cpus to fs.
func (q *QueueFlags) Register(fs *flag.FlagSet) {
	fs.IntVar(&q.Queue, "q", 0, "queue (one); see -queues for several")
	fs.IntVar(&q.Queue, "queue", 0, "same as -q")
	fs.StringVar(&q.Queues, "queues", "", "serve several queues, one thread each: N (queues 0..N-1) or a list (0,2-3)")
	fs.StringVar(&q.CPUs, "cpus", "", "CPUs for the queues' threads, one per queue in turn (e.g. 2-3), or none (no pinning); default with -queues: one per queue from the allowed CPUs; with -q: not pinned")
	fs.StringVar(&q.Exclude, "exclude-cpus", "", "CPUs the default choice skips (e.g. 0)")
}

// Resolve returns the queue ids and the CPU of each (nil CPUs: no
// pinning; mq.Config.NoPin). With -queues the queues are pinned by
// default, one CPU each from the allowed ones minus -exclude-cpus; a
// single -q queue only when -cpus is given.
func (q *QueueFlags) Resolve() (queues, cpus []int, err error) {
	switch {
	case q.Queues == "":
		if q.Queue < 0 {
			return nil, nil, fmt.Errorf("-q %d: must be >= 0", q.Queue)
		}
		queues = []int{q.Queue}
	case !strings.ContainsAny(q.Queues, ",-"):
		n, err := strconv.Atoi(q.Queues)
		if err != nil || n < 1 || n > 1024 {
			return nil, nil, fmt.Errorf("-queues %q: want a count 1..1024 or a list such as 0,2-3", q.Queues)
		}
		for i := range n {
			queues = append(queues, i)
		}
	default:
		queues, err = mq.ParseCPUList(q.Queues) // same syntax
		if err != nil || len(queues) == 0 {
			return nil, nil, fmt.Errorf("-queues %q: want a count 1..1024 or a list such as 0,2-3", q.Queues)
		}
		for i, a := range queues {
			for _, b := range queues[:i] {
				if a == b {
					return nil, nil, fmt.Errorf("-queues %q: queue %d twice", q.Queues, a)
				}
			}
		}
	}
	exclude, err := mq.ParseCPUList(q.Exclude)
	if err != nil {
		return nil, nil, fmt.Errorf("-exclude-cpus %q: %w", q.Exclude, err)
	}
	switch {
	case q.CPUs == "none", q.CPUs == "" && q.Queues == "":
		// One queue by -q: not pinned unless -cpus says where, as before
		// -queues existed.
		return queues, nil, nil
	case q.CPUs == "":
		cpus, err = mq.AssignCPUs(len(queues), exclude)
		if err != nil {
			return nil, nil, fmt.Errorf("-cpus: %w", err)
		}
		return queues, cpus, nil
	}
	pool, err := mq.ParseCPUList(q.CPUs)
	if err != nil || len(pool) == 0 {
		return nil, nil, fmt.Errorf("-cpus %q: want a CPU list such as 2-3 or none", q.CPUs)
	}
	allowed, err := mq.AllowedCPUs()
	if err != nil {
		return nil, nil, err
	}
	for _, c := range pool {
		ok := false
		for _, a := range allowed {
			ok = ok || a == c
		}
		if !ok {
			return nil, nil, fmt.Errorf("-cpus %q: CPU %d is not one this process may run on (%v)", q.CPUs, c, allowed)
		}
	}
	for i := range queues {
		cpus = append(cpus, pool[i%len(pool)])
	}
	return queues, cpus, nil
}

// QueueConfig fills the queue and CPU fields of an mq.Config.
func QueueConfig(c *mq.Config, queues, cpus []int) {
	c.Queues = queues
	c.CPUs = cpus
	c.NoPin = cpus == nil
}

// QueueRate is one queue's share of a rate or count: total split as
// evenly as possible, the first ones getting the remainder.
func QueueRate(total uint64, i, n int) uint64 {
	share := total / uint64(n)
	if uint64(i) < total%uint64(n) {
		share++
	}
	return share
}
