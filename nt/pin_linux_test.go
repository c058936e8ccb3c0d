package nt

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pin locks the calling goroutine to its OS thread and that thread to cpu.
// The thread stays locked: when the goroutine ends the runtime discards the
// thread, so its affinity never leaks to other goroutines.
func pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
	}
	return nil
}

// twoCPUs returns the first two CPUs this process may run on.
func twoCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("reading CPU affinity: %w", err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ { // CPU_SETSIZE
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// BenchmarkProducerConsumer is seed 002's test in user space: a producer
// pinned to one CPU (0 here) copies objects into a ring of buffers larger
// than the 1 MiB L2, a consumer pinned to another (1) reads every byte of
// each buffer and releases it. One op is one object; Gb/s is the payload
// rate.
func BenchmarkProducerConsumer(b *testing.B) {
	cpus, err := twoCPUs()
	if err != nil {
		b.Fatal(err)
	}
	if len(cpus) < 2 {
		b.Skipf("needs 2 CPUs, may run on %v", cpus)
	}
	for _, c := range []struct {
		name         string
		size, slots  int
		publishBatch int
		slotStride   int
	}{
		{"obj=1MiB", 1 << 20, 8, 1, 1 << 20}, // 8 MiB ring, as seed 002's 1 MiB objects
		{"pkt=1500B", 1500, 4096, 32, 2048},  // 8 MiB ring of 2 KiB frames, publish per 32
	} {
		for _, m := range []copyMode{modeCopy, modeNT} {
			b.Run(c.name+"/"+m.name, func(b *testing.B) {
				producerConsumer(b, m, cpus, c.size, c.slots, c.slotStride, c.publishBatch)
			})
		}
	}
}

func producerConsumer(b *testing.B, m copyMode, cpus []int, size, slots, stride, batch int) {
	ring := make([]byte, slots*stride)
	touch(ring)
	src := source(size, 12)[:size]
	var prod, cons atomic.Uint64
	var stop atomic.Bool
	n := uint64(b.N)
	deadline := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	ready := make(chan struct{})

	wg.Add(1)
	go func() { // consumer
		defer wg.Done()
		if err := pin(cpus[1]); err != nil {
			errs <- err
			stop.Store(true)
			close(ready)
			return
		}
		close(ready)
		var scratch [16 << 10]byte
		var seen uint64
		for seq := uint64(0); seq < n && !stop.Load(); {
			p := prod.Load()
			if p == seq {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("consumer waited past the deadline at %d of %d", seq, n)
					stop.Store(true)
					return
				}
				continue
			}
			for ; seq < p; seq++ {
				buf := ring[int(seq%uint64(slots))*stride:][:size]
				for off := 0; off < len(buf); off += len(scratch) {
					copy(scratch[:], buf[off:])
				}
				seen += uint64(buf[size-1])
			}
			cons.Store(seq)
		}
		if seen == 1 {
			fmt.Print("")
		}
	}()

	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		if err := pin(cpus[0]); err != nil {
			errs <- err
			stop.Store(true)
			return
		}
		<-ready
		for seq := uint64(0); seq < n && !stop.Load(); {
			end := min(seq+uint64(batch), n)
			for end-cons.Load() > uint64(slots) {
				if stop.Load() {
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("producer waited past the deadline at %d of %d", seq, n)
					stop.Store(true)
					return
				}
			}
			for ; seq < end; seq++ {
				m.fn(ring[int(seq%uint64(slots))*stride:][:size], src)
			}
			if m.fence > 0 {
				Fence()
			}
			prod.Store(seq)
		}
	}()

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size)*8*float64(b.N)/elapsed.Seconds()/1e9, "Gb/s")
}
