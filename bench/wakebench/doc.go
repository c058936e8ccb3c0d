// Command wakebench is the Go half of make bench's wake-up cost
// comparison, and its waker. It measures what one sleep and wake-up costs
// a receiver in CPU time when the wake-up comes from another CPU, as a
// packet's does on veth: the Go runtime's network poller (the way an
// rxpath.Poller sleeps) against poll(2) (the way the C reference
// bench/c/xdpbench.c sleeps; bench/c/wakebench.c is its C half).
//
//	wakebench -m wait FIFO N       # sleep in the runtime's poller until N bytes came
//	wakebench -m wake FIFO N GAP   # write N bytes one at a time, GAP apart
//
// The waiter opens the named pipe FIFO read-write and non-blocking,
// registers it with the runtime's poller (os.NewFile, SyscallConn().Read)
// and reads it from the readiness callback with a raw read(2), until the
// pipe is empty; then it parks until the pipe is readable again. The raw
// read stands for a Poller's look at its RX ring, which makes no system
// call: a syscall.Syscall there would wake the runtime's sysmon thread
// after every sleep (entersyscall does while sysmon sleeps), which a
// Poller does not pay. At the end the waiter prints one JSON line
//
//	{"impl":"go","wakes":W,"bytes":N,"cpu_ns":C,"ctx_switches":S}
//
// as the C half does: W parks, C the process's CPU time (all threads) from
// the first read to the last, S getrusage's context switches meanwhile.
// The waker spins on the clock between writes; the harness pins it to the
// other CPU. bench/harness runs both halves (-only wake).
package main
