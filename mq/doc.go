// Package mq runs an AF_XDP application on several queues at once: one
// socket per queue and interface, one goroutine per queue locked to an OS
// thread pinned to its own CPU, and nothing shared between queues on the
// per-packet path.
//
// A NIC spreads its traffic over its receive queues (RSS) and AF_XDP binds
// a socket to one queue, so an AF_XDP program reaches more than one core's
// worth of packets only with one socket per queue, each served by its own
// core. That is the shape of libxdp's multi-queue users and of DPDK's
// af_xdp PMD, and it is what [Open] builds:
//
//	queue i:  UMEM i ── socket (ifname[0], queue i) ── Poller i ── Sender(s) i
//	                 └─ socket (ifname[1], queue i)          (goroutine on CPU i)
//
// # UMEM: one per queue, shared by the queue's interfaces
//
// Each queue has its own UMEM. Its allocator's mutex, its accounting
// counters and its frames are then touched by one goroutine only, so no
// cache line is written by two cores. When the Set spans two interfaces,
// the queue's two sockets share that UMEM (XDP_SHARED_UMEM, Linux 5.10): a
// forwarder keeps a received frame (rxpath.Packet.Keep) and puts its
// descriptor on the other interface's TX ring, which is only possible for
// a frame of a UMEM that both sockets were bound with. One UMEM for all
// queues would also forward, but every Get/Put would then take one mutex
// from every core.
//
// # Threads and CPUs
//
// [Set.Run] starts one goroutine per queue. Each locks itself to its OS
// thread (runtime.LockOSThread) and pins that thread to the queue's CPU
// with sched_setaffinity before it polls. It never unlocks: when the
// goroutine ends, the Go runtime ends the thread instead of handing a
// pinned thread to other goroutines. The CPUs come from Config.CPUs, or
// by default one per queue in order from the CPUs the process may run on
// ([AssignCPUs]), skipping Config.ExcludeCPUs.
//
// A goroutine locked to its thread runs only while that thread holds one
// of the runtime's GOMAXPROCS Ps; busy queue threads that outnumber the Ps
// take turns through the scheduler. So while queues run, GOMAXPROCS is
// kept at least at the number of running queue threads plus one, and
// given back when the last stops (without it BenchmarkQueues shows more
// queues slower than fewer on a host with few CPUs). [Queue.CPUTime] is the CPU time
// of a queue's thread during the last Run or Go: its cost per packet.
//
// # Per-packet path
//
// A queue's goroutine touches only its queue: its rings, its UMEM, its
// Poller and Senders, its handler and its [Counters], which sit in cache
// lines of their own. Nothing takes a lock that another queue's goroutine
// takes. Stats from another goroutine read each queue's published
// counters and sum them ([Set.Stats]).
//
// # Channels
//
// [Channels] reads a device's channel counts (ethtool -l) and
// [SetChannels] sets them where the driver allows (ethtool -L; veth does,
// up to the queues it was created with), through
// github.com/safchain/ethtool's SIOCETHTOOL calls.
//
// # Closing
//
// [Set.Close] stops every queue's goroutine and waits for it, gives the TX
// rings up to a second to complete, closes the Senders, detaches the XDP
// programs, closes the sockets, reclaims every frame the pollers lent to
// the kernel, checks that each UMEM has all its frames back (it reports
// ErrFramesLost otherwise) and closes the UMEMs.
package mq
