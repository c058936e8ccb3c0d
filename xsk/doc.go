// Package xsk provides AF_XDP sockets: the four rings shared with the
// kernel, binding to a network device queue, wake-ups, statistics, and the
// XDP program that steers packets into the sockets.
//
// # The four rings
//
// An AF_XDP socket exchanges frames of a [umem.UMEM] with the kernel through
// four single-producer, single-consumer rings. Each ring is an array of
// entries in memory mapped from the socket, with a producer index written
// only by the producer and a consumer index written only by the consumer;
// each side caches the other's index and reads it again (an atomic load,
// which orders the entry accesses after it) only when the cache says the
// ring is full or empty, and publishes its own index with an atomic store
// after writing or reading the entries.
//
//	ring        entries            producer      consumer
//	Fill        frame addresses    application   kernel     frames lent for receiving
//	RX          descriptors        kernel        application  received packets
//	TX          descriptors        application   kernel     packets to send
//	Completion  frame addresses    kernel        application  sent frames given back
//
// A received frame travels Fill -> RX -> application, which either returns
// it to the Fill ring or sends it (TX -> Completion), without copying: all
// four rings name frames of the same UMEM. Several sockets (queues, or
// devices) may share one UMEM; each then has its own Fill and Completion
// ring (XDP_SHARED_UMEM).
//
// # Wake-ups
//
// With need_wakeup (on by default) the kernel sets a flag on the Fill or TX
// ring when it stopped processing and wants a system call to start again.
// [Socket.KickTX] and [Socket.KickRX] make that call only when the flag is
// set, so a busy socket costs no system call per batch. EAGAIN, EBUSY and
// ENOBUFS from a kick mean "kick again later" and are not errors; the
// caller kicks again while [TXRing.Pending] is non-zero.
//
// # Waiting
//
// On its first wait the socket is registered with the Go runtime's network
// poller, so [Socket.WaitRX] blocks a goroutine, not an OS thread, until the
// RX ring has descriptors or the context ends. (Only then: the netpoller's
// epoll polls a registered socket on every wake-up, and in copy mode that
// poll also transmits.)
//
// # Close
//
// Close may run while other goroutines use the socket: ring operations
// enter a guard (two atomic adds per batch), Close waits for those in
// progress before it unmaps the rings, and later operations take nothing
// while kicks, waits and Stats return os.ErrClosed.
//
// Close in the reverse order of creation, as plain defers do: the
// txpath.Sender and rxpath.Poller of a socket, then the Program, the
// socket and last its UMEM. A Sender or Poller closed before its socket
// gets the frames the kernel still held back when the socket closes
// ([Socket.OnClose]); closed after it, at once.
//
// # Kicks
//
// Kicks use RawSyscall: sendto and recvfrom with MSG_DONTWAIT never block
// and are bounded by the TX budget, and an ordinary Syscall lost the P to
// the scheduler often enough to cost a third of the TX rate when pinned.
//
// # Copy and zero-copy
//
// Bind asks for zero-copy where the driver supports it and falls back to
// copy mode ([ModeAuto]); [ModeCopy] and [ModeZeroCopy] force one.
// [Socket.ZeroCopy] tells which the kernel gave. veth supports copy mode
// only.
//
// # NAPI deferral
//
// [SetNAPIDeferral] sets a device's interrupt deferral
// (napi_defer_hard_irqs, gro_flush_timeout and, from Linux 6.14, the
// busy-poll irq_suspend_timeout) through the netdev family's napi-set
// (Linux 6.13), or through the device's sysfs files on older kernels,
// and puts the old settings back on [NAPIChange.Restore]. The kernel then
// fills the RX ring in batches, and a receiver that sleeps wakes once per
// batch: make bench's "NAPI deferral" rows. xdprecv -napi-defer and
// -napi-gro-flush use it.
package xsk
