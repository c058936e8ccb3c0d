package rxpath

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkSleepCycle measures what one sleep and wake-up costs in CPU
// time (cpu-ns/op, the whole process) and in wall time (ns/op, the sleep
// of 20 µs included): netpoller, the way a Poller sleeps (a timerfd
// watched through the Go runtime's poller), and poll, a poll(2) on the
// timerfd through unix.Poll. Spinning through a wait costs about the wait
// in CPU; sleeping costs cpu-ns/op, whatever the wait: the break-even an
// idle rule weighs. The timer fires on the sleeping CPU itself, and poll
// goes through the runtime's system-call entry and exit, which a C
// program does not. make bench's wake-up cost table (bench/harness, -only
// wake) compares the runtime's poller with C's poll(2), woken from the
// other CPU as a packet wakes a receiver on veth.
func BenchmarkSleepCycle(b *testing.B) {
	const sleep = 20 * time.Microsecond
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(sleep))}
	b.Run("netpoller", func(b *testing.B) {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
		if err != nil {
			b.Fatal(err)
		}
		f := os.NewFile(uintptr(fd), "timerfd")
		defer f.Close()
		rc, err := f.SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		c0 := processCPU()
		b.ResetTimer()
		for range b.N {
			at := time.Now().Add(sleep)
			if err := unix.TimerfdSettime(fd, 0, &its, nil); err != nil {
				b.Fatal(err)
			}
			if err := rc.Read(func(uintptr) bool { return !time.Now().Before(at) }); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("poll", func(b *testing.B) {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		var buf [8]byte
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		c0 := processCPU()
		b.ResetTimer()
		for range b.N {
			if err := unix.TimerfdSettime(fd, 0, &its, nil); err != nil {
				b.Fatal(err)
			}
			if _, err := unix.Poll(pfd, 100); err != nil && err != unix.EINTR {
				b.Fatal(err)
			}
			if _, err := unix.Read(fd, buf[:]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
	})
}
