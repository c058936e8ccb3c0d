package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Sample is a snapshot of a program's running totals.
type Sample struct {
	Packets, Bytes, Drops uint64
	// Queues are the packets per queue, for programs serving several;
	// the status line then shows each queue's rate.
	Queues []uint64
}

// Meter turns successive Samples into rates and CPU use.
type Meter struct {
	start, last time.Time
	prev        Sample
	prevCPU     time.Duration
}

// NewMeter starts measuring now.
func NewMeter() *Meter {
	now := time.Now()
	return &Meter{start: now, last: now, prevCPU: CPUTime()}
}

// CPUTime is the process's user plus system time (getrusage).
func CPUTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Line returns the status line for s: elapsed time, pps, Mb/s, drops in
// the interval and CPU use (100% is one core) since the previous Line.
func (m *Meter) Line(s Sample) string {
	now := time.Now()
	dt := now.Sub(m.last).Seconds()
	cpu := CPUTime()
	if dt <= 0 {
		dt = 1e-9
	}
	pps := float64(s.Packets-m.prev.Packets) / dt
	mbps := float64(s.Bytes-m.prev.Bytes) * 8 / dt / 1e6
	// Drops may fall back when a datagram counted lost comes late
	// (reordered): the line shows no negative drops, and the next
	// interval counts from the highest total seen.
	var drops uint64
	if s.Drops > m.prev.Drops {
		drops = s.Drops - m.prev.Drops
	} else {
		s.Drops = m.prev.Drops
	}
	cpuPct := float64(cpu-m.prevCPU) / float64(now.Sub(m.last)) * 100
	line := fmt.Sprintf("%7.1fs %10.0f pps %9.1f Mb/s  drops %d  cpu %5.1f%%  total %d pkts",
		now.Sub(m.start).Seconds(), pps, mbps, drops, cpuPct, s.Packets)
	if len(s.Queues) > 1 {
		line += "  per queue pps"
		for i, n := range s.Queues {
			var prev uint64
			if i < len(m.prev.Queues) {
				prev = m.prev.Queues[i]
			}
			line += fmt.Sprintf(" %.0f", float64(n-prev)/dt)
		}
	}
	m.last, m.prev, m.prevCPU = now, s, cpu
	return line
}

// Elapsed is the time since NewMeter.
func (m *Meter) Elapsed() time.Duration { return time.Since(m.start) }

// Run calls run on a goroutine of its own and, unless quiet, prints
// "name: " and a status line from sample every second until run returns.
// A context error from run is how a program is stopped, not a failure:
// Run returns nil for it.
func Run(name string, quiet bool, run func() error, sample func() Sample) error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	m := NewMeter()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		case <-tick.C:
			if !quiet {
				fmt.Println(name+":", m.Line(sample()))
			}
		}
	}
}
