// Package rxpath receives packets from AF_XDP sockets the way NAPI does:
// bounded work per poll, back to sleep when a poll comes up short, and
// polling again at once while traffic flows.
//
// # Rounds
//
// A [Poller] serves one or more [xsk.Socket]s (queues, or interfaces). A
// round visits the sockets round-robin. Each visit takes at most
// Config.Weight packets from one socket (default 64, NAPI_POLL_WEIGHT); a
// socket whose visit took its whole weight is visited again later in the
// same round, one that came up short is done. The round ends when every
// socket came up short in turn, when it has taken Config.Budget packets in
// all (default 300, net.core.netdev_budget) or when Config.RoundTime has
// passed (default 2 ms, net.core.netdev_budget_usecs). The next visit
// starts after the last socket visited, so no socket starves another.
//
// A round that used its budget (or its time) is followed by another at
// once, and so is one that took packets. After an empty round the poller
// chooses between three ways to wait for the next packet:
//
//   - Poll again at once (a spin): while the silence since the last
//     packet is shorter than the spin limit (Stats.SpinLimit), and the
//     poller has been awake for less than 3 SleepCosts since its last
//     sleep or nap (the duty rule). Polling through an idle period costs
//     its length in CPU, a sleep costs its own CPU and its wake-up's
//     (Stats.SleepCPU: the least of the last 8 samples of the process's
//     CPU time from a sleep's start to the wake-up a socket brought,
//     every 16th sleep, where the sleep blocked without yielding first,
//     lasted from half a SleepCost to 4 SleepCosts and took at most half
//     its wall time in CPU, less what the clock's reads add; a SleepCost
//     until one did), whatever the period's length; in the flow sleep
//     (ppoll while packets flow, below) also the delay its wake-up adds
//     to the packet that ends it, a microsecond of delay weighing as one
//     of CPU. The poller keeps a histogram of the idle periods
//     it sees (from the first empty round after packets to the next
//     packet) and, every 64 of them, takes for its limit the bound that
//     would have cost them least, up to SleepCPU (that cost of a sleep
//     leaves out the packets its wake-up gathers into one round, so the
//     poller polls no longer than a sleep costs) and never beyond
//     SleepCost: a paced sender's bursts then cost a spin over the short
//     gaps within a burst and one sleep for the long gap between two.
//     The duty rule bounds what a stream whose gaps all fall within the
//     limit costs: without it the poller would poll a whole CPU however
//     few packets the gaps hold. After 3 SleepCosts awake (or 3 times its
//     last sleep, if that lasted longer) it sleeps at the next empty
//     round; the packets of that sleep's wake-up, about a quarter of such
//     a stream, wait for it, the rest are taken as they arrive, and the
//     poller's CPU falls (the table below: against the receiver that
//     polls 64 empty rounds first, which never sleeps on the paced
//     300 kpps and 1 Mpps traces). The spin rule dates an arrival after a
//     sleep one SleepCost before the wake-up (after a flow sleep, below,
//     one of its own wake-ups): where wake-ups come later
//     than that, idle periods look longer than they were and the poller
//     sleeps more, for less CPU and up to a wake-up of delay.
//   - Nap, only within a delay budget (Config.MaxDelay, or an explicit
//     Config.Coalesce; the default has none and never naps): sleep for
//     Config.Coalesce (default 4 SleepCosts) cut to the budget, on a
//     timer, with the sockets taken out of the epoll set's watch, so that
//     the packets that arrive meanwhile gather on the RX rings and one
//     round takes them all, as the kernel's NAPI deferral
//     (gro_flush_timeout) does. Chosen while packets flow: the expected
//     gap to the next arrival plus its mean deviation, and the silence
//     since the last packet, are shorter than a nap lasts (Stats.NapTime,
//     measured), naps end on time (NapTime within 4 timers, or the
//     budget, plus two SleepCosts; otherwise one nap every 256 NapTimes,
//     to measure again) and, unless Coalesce is explicit, a nap costs
//     less CPU than it lasts (Stats.NapCost: the process's CPU time
//     around every 16th nap). A nap costs one sleep for every packet that
//     arrives within it, and a packet may wait on the ring for up to a
//     nap: the budget plus the timer's wake-up. A larger budget gathers
//     more packets per wake-up, for less CPU per packet and more delay.
//   - Sleep until a socket is readable: otherwise.
//
// The expected gap is a moving average of the time between arrivals
// seen after spins and sleeps. Stats reports the decisions and what they
// rest on: Spins, Naps, NapsEmpty, Sleeps, SleepCost, SleepCPU,
// SpinLimit, ExpectedGap, NapTime, NapCost. Config.IdleRounds replaces the rule (and naps) with
// a fixed count of spins. A round that came up short and does not poll
// again or nap completes, as napi_complete_done does: the poller gives
// every Fill ring its frames back, wakes the kernel where a Fill ring
// asks for it (need_wakeup), and sleeps until a socket is readable or the
// context ends. Such a sleep holds no OS thread (but see the flow sleep
// below): the sockets' descriptors are watched by one epoll instance
// whose own descriptor is registered with the Go runtime's network
// poller, so one parked goroutine waits for any
// number of sockets and a wake-up allocates nothing. The sockets are
// in that epoll set only for sleeps: they are taken out for a nap and
// after 32 rounds with packets since the last sleep, and put back before
// the next sleep (one epoll_ctl per socket each way). In the set, every
// packet the kernel puts on a ring would run the epoll callbacks on the
// sending CPU and, during a nap, wake the runtime's poller thread. An
// empty RX ring costs an atomic load, never a system call.
//
// Config.BusyPoll makes every round start with a recvfrom on each socket,
// which drives the driver's NAPI from this goroutine when the socket was
// created with xsk.Config.PreferBusyPoll and BusyPollBudget. Config.Spin
// locks the goroutine to its OS thread and never sleeps: the lowest
// latency at the price of a CPU.
//
// While packets flow (one came within the last 5 ms) the Poller sleeps
// instead in one ppoll(2) on its sockets on the thread that runs it, as a
// C receiver sleeps in poll(2): the runtime's poller costs two
// epoll_pwait calls and the goroutine's park and wake-up per sleep, more
// CPU per wake-up than poll(2) (make bench's Wake-up cost table), which a
// receiver woken for every few packets pays per packet. The goroutine
// keeps its P meanwhile, as a goroutine that computes does; a ppoll lasts
// at most 5 ms, the Poller yields every 4 ms or so, and the runtime's
// preemption signal (a garbage collection's stop) ends a ppoll at once.
// It does so only while a P is left for the rest of the process, which
// runs its goroutines, timers and network there: while fewer of the
// process's Pollers sleep so than GOMAXPROCS less one. With GOMAXPROCS 1
// every sleep is the runtime's; package mq keeps GOMAXPROCS above its
// number of queues. Once no packet has come for 5 ms, and for the short sleeps of a
// starved Poller, it sleeps in the runtime's poller, holding nothing,
// until packets come back. Stats.ThreadWakeups counts the wake-ups from
// ppoll. Config.RuntimeSleep makes every sleep the runtime's, for a
// program that wants the P free during every sleep, at more CPU per
// wake-up.
//
// # The governor
//
// The choice above is a unit of its own, the governor (governor.go, with
// the spin rule in spin.go): one struct holds its state; the receive loop
// tells it what happened (a round began, a round took packets or none, a
// nap or a sleep began and ended and what it cost) and, after every empty
// round, asks it whether to poll again, nap or sleep.
//
// A simulator in the package's tests (governor_sim_test.go) drives it
// with synthetic arrival traces on a virtual clock, no sockets and no
// real time, charging CPU and delay from constants the simulator chooses
// (a sleep's and a nap's CPU, a wake-up's lateness, an empty round, a
// packet: see the test; models, not measurements). It sleeps as
// Poller.sleep does: in ppoll(2) on the poller's thread while packets
// flow (cheaper and quicker to wake than the runtime's poller, as make
// bench's wake-up cost table shows), through the runtime's poller with
// Config.RuntimeSleep or once the stream stopped; a nap waits in the
// runtime's poller. Its references are Pollers with another idle policy,
// sleeping the same way: one that sleeps whenever its ring is empty, and
// one that polls 64 empty rounds before it sleeps, as make bench's C
// receiver does before poll(2). It asserts per trace that no packet waits
// longer than the budget plus a wake-up, that the delay added to that of
// the receiver that sleeps whenever its ring is empty is within the budget
// and a nap's longer wake-up, and that a stream that stops ends in a
// sleep. Against the C receiver's policy the default's median wait is no
// longer and its CPU per packet no more, but on Poisson arrivals, where it
// polls through longer gaps than 64 rounds last and pays a little more
// CPU for a shorter median. The simulated flowSleepCost, as on a real
// host, is a timer's wake-up, longer than a socket's: an arrival after a
// flow sleep is dated before it came, the idle period before it looks
// shorter than it was, and the default polls through gaps it could sleep
// through, at more CPU than the receiver that sleeps whenever its ring is
// empty for the same waits (paced 100 kpps below). Where naps wake late
// (a contended CPU) the governor stops napping. The simulated
// results (go test -run TestGovernorTable ./rxpath/ -update-doc writes
// them here; each trace lasts 100 ms and is followed by silence; wait is
// from a packet's arrival to the round that takes it):
//
//	| trace | policy | CPU µs/packet | p50 µs | p99 µs | max µs | naps | sleeps | spins |
//	|---|---|--:|--:|--:|--:|--:|--:|--:|
//	| paced 100 kpps | default | 4.36 | 10.0 | 10.4 | 10.4 | 0 | 5002 | 162200 |
//	| paced 100 kpps | RuntimeSleep | 2.77 | 10.0 | 20.4 | 20.4 | 0 | 3334 | 0 |
//	| paced 100 kpps | MaxDelay 1 SleepCost | 2.32 | 19.9 | 39.7 | 40.8 | 2478 | 2 | 0 |
//	| paced 100 kpps | MaxDelay 4 SleepCosts | 0.96 | 49.8 | 99.1 | 100.8 | 995 | 2 | 0 |
//	| paced 100 kpps | sleep when empty | 3.36 | 10.0 | 10.0 | 10.0 | 0 | 5002 | 0 |
//	| paced 100 kpps | 64 empty rounds, then sleep | 5.28 | 10.0 | 10.0 | 10.0 | 0 | 5002 | 320128 |
//	| paced 300 kpps | default | 2.99 | 0.0 | 10.0 | 10.4 | 0 | 1628 | 1263869 |
//	| paced 300 kpps | RuntimeSleep | 2.81 | 0.0 | 20.0 | 20.4 | 0 | 1203 | 1192487 |
//	| paced 300 kpps | MaxDelay 1 SleepCost | 0.80 | 19.7 | 39.7 | 40.9 | 2453 | 2 | 0 |
//	| paced 300 kpps | MaxDelay 4 SleepCosts | 0.35 | 49.3 | 99.2 | 100.8 | 985 | 2 | 0 |
//	| paced 300 kpps | sleep when empty | 1.71 | 6.7 | 10.0 | 10.0 | 0 | 7503 | 0 |
//	| paced 300 kpps | 64 empty rounds, then sleep | 3.33 | 0.0 | 0.1 | 0.1 | 0 | 2 | 1611791 |
//	| paced 1 Mpps | default | 0.94 | 0.0 | 10.0 | 10.4 | 0 | 1544 | 1219259 |
//	| paced 1 Mpps | RuntimeSleep | 0.85 | 0.0 | 20.0 | 20.4 | 0 | 1278 | 1083800 |
//	| paced 1 Mpps | MaxDelay 1 SleepCost | 0.27 | 18.9 | 39.7 | 40.9 | 2362 | 2 | 0 |
//	| paced 1 Mpps | MaxDelay 4 SleepCosts | 0.14 | 47.4 | 99.0 | 100.5 | 949 | 2 | 0 |
//	| paced 1 Mpps | sleep when empty | 0.65 | 5.0 | 10.0 | 10.0 | 0 | 9093 | 0 |
//	| paced 1 Mpps | 64 empty rounds, then sleep | 1.00 | 0.0 | 0.1 | 0.1 | 0 | 2 | 1483449 |
//	| Poisson 300 kpps | default | 2.32 | 2.5 | 10.0 | 10.4 | 0 | 4685 | 600814 |
//	| Poisson 300 kpps | RuntimeSleep | 2.42 | 0.1 | 20.0 | 20.4 | 0 | 1841 | 916912 |
//	| Poisson 300 kpps | MaxDelay 1 SleepCost | 0.80 | 19.7 | 39.7 | 40.8 | 2453 | 2 | 0 |
//	| Poisson 300 kpps | MaxDelay 4 SleepCosts | 0.35 | 49.3 | 99.0 | 100.8 | 985 | 2 | 0 |
//	| Poisson 300 kpps | sleep when empty | 1.70 | 6.5 | 10.0 | 10.0 | 0 | 7478 | 0 |
//	| Poisson 300 kpps | 64 empty rounds, then sleep | 2.28 | 2.8 | 10.0 | 10.0 | 0 | 4767 | 576793 |
//	| bursts of 32, 100 µs apart | default | 0.26 | 8.5 | 10.3 | 10.4 | 0 | 1001 | 0 |
//	| bursts of 32, 100 µs apart | RuntimeSleep | 0.31 | 18.5 | 20.3 | 20.4 | 0 | 1000 | 0 |
//	| bursts of 32, 100 µs apart | MaxDelay 1 SleepCost | 0.26 | 8.5 | 10.0 | 10.4 | 3 | 1001 | 0 |
//	| bursts of 32, 100 µs apart | MaxDelay 4 SleepCosts | 0.33 | 48.3 | 97.3 | 99.4 | 983 | 2 | 0 |
//	| bursts of 32, 100 µs apart | sleep when empty | 0.26 | 8.5 | 10.0 | 10.0 | 0 | 1001 | 0 |
//	| bursts of 32, 100 µs apart | 64 empty rounds, then sleep | 0.38 | 8.5 | 10.0 | 10.0 | 0 | 1001 | 64064 |
//	| on/off: 1 ms at 1 Mpps, 4 ms off | default | 0.93 | 0.0 | 10.0 | 10.4 | 0 | 380 | 232177 |
//	| on/off: 1 ms at 1 Mpps, 4 ms off | RuntimeSleep | 0.85 | 0.0 | 20.0 | 20.4 | 0 | 261 | 215398 |
//	| on/off: 1 ms at 1 Mpps, 4 ms off | MaxDelay 1 SleepCost | 0.30 | 18.2 | 39.6 | 40.8 | 482 | 82 | 65 |
//	| on/off: 1 ms at 1 Mpps, 4 ms off | MaxDelay 4 SleepCosts | 0.18 | 45.2 | 99.2 | 100.2 | 214 | 82 | 65 |
//	| on/off: 1 ms at 1 Mpps, 4 ms off | sleep when empty | 0.65 | 5.0 | 10.0 | 10.0 | 0 | 1822 | 0 |
//	| on/off: 1 ms at 1 Mpps, 4 ms off | 64 empty rounds, then sleep | 1.00 | 0.0 | 0.1 | 10.0 | 0 | 21 | 294458 |
//	| 300 kpps for 20 ms, then 1 s idle | default | 2.81 | 0.0 | 10.4 | 10.4 | 0 | 537 | 211137 |
//	| 300 kpps for 20 ms, then 1 s idle | RuntimeSleep | 2.71 | 0.0 | 20.0 | 20.4 | 0 | 280 | 224174 |
//	| 300 kpps for 20 ms, then 1 s idle | MaxDelay 1 SleepCost | 0.81 | 19.7 | 39.7 | 40.9 | 492 | 2 | 0 |
//	| 300 kpps for 20 ms, then 1 s idle | MaxDelay 4 SleepCosts | 0.36 | 49.4 | 99.2 | 100.8 | 198 | 2 | 0 |
//	| 300 kpps for 20 ms, then 1 s idle | sleep when empty | 1.71 | 6.7 | 10.0 | 10.0 | 0 | 1502 | 0 |
//	| 300 kpps for 20 ms, then 1 s idle | 64 empty rounds, then sleep | 3.34 | 0.0 | 0.1 | 0.1 | 0 | 2 | 322430 |
//
// With a wake-up as late as a nap's, any nap adds to the wait of the
// receiver that sleeps whenever its ring is empty: the budget sets how
// much, and buys CPU with it. The simulator's senders do not react to
// the receiver; on veth the sending CPU also runs the receiver's XDP
// program and copy, and pays for every wake-up of a sleeping receiver.
// make bench's paced sender keeps its pace while it keeps up, but a
// receiver that sleeps more slows it, and it then catches up in batches:
// its latency rows move between runs more than the simulator's figures
// suggest.
//
// # Delivery: copy or lend
//
// The handler sees one [Packet] at a time. A single-buffer packet of at
// most Config.CopyThreshold bytes is copied out (into a buffer the handler
// supplies when it implements [Copier], otherwise into the poller's own)
// and its UMEM frame goes back to the Fill ring at once. Larger packets,
// and every multi-buffer packet (XDP_PKT_CONTD chains, delivered whole in
// Packet.Segments), are lent: Data aliases the UMEM. A lent packet is
// returned to the Fill ring when the handler returns, unless the handler
// calls [Packet.Keep], which hands it the descriptors: the caller then owns
// the frames and gives them back with umem.Put or by sending them on a TX
// ring of the same UMEM, which is how a forwarder avoids copying payload.
// A forwarder gives its completed frames back with [Poller.Recycle] from
// the handler (Receive or EndRound, on Run's goroutine): they go onto the
// Fill ring in the order they completed, which for a forwarder that sends
// on one socket what it received, in that order, is the order the kernel
// filled them, as the frames of packets not kept come back. Through the
// allocator they would come out mixed with frames freed earlier, and in
// copy mode the kernel's receive path, which takes each Fill ring entry's
// frame and its own state of that frame, would walk them out of sequence.
//
// # Frames and validation
//
// The poller keeps each Fill ring topped up to Config.FillFrames frames
// (by default the ring's size, but no more than half of a UMEM that its
// sockets can also send from, so that a txpath.Sender finds frames),
// first with the frames it just received and those given to
// Poller.Recycle, in order, then from the UMEM allocator (for a socket
// whose frames come back through Recycle, only while its ring holds less
// than half of Config.FillFrames or none, and before a sleep only for
// frames that are neither on its Fill or RX ring nor waiting in the
// poller: a frame on a TX ring counts as missing), in batches of
// Config.FillBatch. A refill that finds no frame to give is
// counted (Stats.FillStarved), and the poller then sleeps briefly instead
// of waiting for packets that cannot arrive.
//
// Every descriptor is checked before its frame is touched: its address and
// length must lie inside one frame of the UMEM, and the frame must be one
// the poller lent to the kernel and has not had back. A descriptor that
// fails is counted (Stats.Invalid) and dropped with its whole packet,
// never dereferenced. The bounds and chain check is the pure function
// behind [SplitPacket], which the package's fuzz test exercises.
//
// # Checksums the sender left unfinished
//
// The poller hands packets over as the XDP program saw them. A packet
// that a peer on a software device (veth, netkit, tun/tap, macvlan,
// ipvlan, a bridge) sent with checksum offload (its kernel with
// tx-checksumming on, or an AF_XDP sender's TX metadata) arrives with
// only the pseudo-header sum in its UDP or TCP checksum field: no device
// finished it, and the kernel's "this checksum is to be trusted" mark does
// not reach XDP. csum.VerifyTransport and csum.VerifyFrame tell such a
// field (csum.Partial) from a wrong one (csum.Bad); xdprecv counts the two
// apart. A receiver that answers or forwards the packet to anyone but its
// own kernel must finish the checksum first (csum.FillTransport).
//
// # Shutting down
//
// Run returns when its context ends. The frames the poller lent to the
// kernel stay on the Fill rings until the sockets are closed. Close the
// Poller before or after its sockets, whichever comes naturally: its
// Close gives them back to the UMEM allocator as soon as the last socket
// is closed ([Poller.Reclaim] does it on demand), so that
// umem.Accounting().Free == Total again. Plain defers, which close in the
// reverse order of creation, do the right thing:
//
//	u, _ := umem.New(nil)
//	defer u.Close() // last: no socket uses it any more
//	sock, _ := xsk.New("eth0", 0, u, nil)
//	defer sock.Close() // the Poller's frames come back here
//	p, _ := rxpath.New(nil, sock)
//	defer p.Close()
package rxpath
