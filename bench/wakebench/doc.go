// Command wakebench is the Go half of make bench's wake-up cost
// comparison, and its waker. It measures what one sleep and wake-up costs
// a receiver in CPU time when the wake-up comes from another CPU, as a
// packet's does on veth: the Go runtime's network poller, the way an
// rxpath.Poller sleeps, against poll(2), the way the C reference
// bench/c/xdpbench.c sleeps (bench/c/wakebench.c is the C half).
//
//	wakebench -m wait FIFO N       # sleep as a Poller does until N bytes came
//	wakebench -m wait-thread FIFO N  # as a Poller does while packets flow
//	wakebench -m wake FIFO N GAP   # write N bytes one at a time, GAP apart
//
// -m wait-thread sleeps in ppoll(2) on the pipe through RawSyscall on the
// goroutine's thread, with rxpath/thread.go's 5 ms timeout and a
// runtime.Gosched every 4 ms. -m wait-thread-syscall does the same through
// unix.Syscall (the runtime's system call entry and exit), which rxpath
// does not use: run by hand (each waiter under taskset -c 1 against
// `wakebench -m wake FIFO 10000 200us` under taskset -c 0), it shows what
// the runtime's system call entry adds to every wake-up. make bench runs
// the other three (cd bench/harness && go run . -only wake) and writes
// their CPU per wake-up in its Wake-up cost table.
//
// The waiter opens the named pipe FIFO read-write and non-blocking and
// sleeps on it as an rxpath.Poller sleeps on its sockets (rxpath/wait.go):
// an epoll set of its own watches the pipe and is registered with the
// runtime's poller (os.NewFile, SyscallConn().Read), with a read deadline
// that most sleeps leave alone; the readiness callback reads the pipe with
// a raw read(2) until it is empty, then the goroutine parks. The raw read
// stands for a Poller's look at its RX ring, which makes no system call:
// with unix.Read there (a system call through the runtime's entersyscall,
// which wakes the sysmon thread when it sleeps because every P was idle)
// the waiter made 3 context switches per wake-up instead of 1, which a
// Poller does not pay. At the end the waiter prints one JSON line
//
//	{"impl":"go","wakes":W,"bytes":N,"cpu_ns":C,"ctx_switches":S}
//
// as the C half does: W the parks that ended with the pipe readable, C the
// process's CPU time (all threads) from the first read to the last, S
// getrusage's context switches meanwhile. The waker spins on the clock
// between writes, going on from now when it falls behind; the harness pins
// it to the other CPU. bench/harness runs both halves (-only wake).
package main
