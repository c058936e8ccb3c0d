// Command xdpkitbench is the Go side of xdpkit's AF_XDP benchmarks: the
// counterpart of the C reference bench/c/xdpbench.c, with the same flags,
// the same defaults and the same one-line JSON result, so that `make bench`
// can run both on the same veth topologies and compare them.
//
// Modes (-m):
//
//	txonly  transmits UDP/IPv4 frames of -s bytes through txpath.Sender
//	        (Next + Commit, batches of -b, one producer-index store and at
//	        most one kick per batch, completions reaped in batches). Like
//	        xdpbench, every UMEM frame holds the same packet, written once
//	        before the run, so both measure the rings, not the packet
//	        builder. "gen" is an alias. --tx ring uses xsk's TX and
//	        Completion rings directly with xdpbench's default strategy
//	        instead (keep the ring full, KickTX when the kernel asks),
//	        as xdpbench --drain uses the Sender's.
//	rxdrop  receives on queue -q of -i through rxpath.Poller (every packet
//	        lent, none copied, none read; frames back on the Fill ring at
//	        once), with the XDP program of xsk.AttachProgram.
//	fwd     receives on -i (rxpath.Poller, the socket owning the UMEM),
//	        rewrites the Ethernet addresses in place (destination --dst-mac,
//	        source the MAC of -o), keeps the frames (Packet.Keep) and puts
//	        them on the TX ring of a second socket on -o that shares the
//	        UMEM: zero copies. Completed frames go back to the poller's
//	        Fill ring in the order they completed (rxpath.Poller.Recycle),
//	        not through the UMEM allocator. --l3 routes as
//	        well, with xdpfwd's per-packet rewrite (apps/xdpfwd's handle):
//	        pkt.Parse, pkt.DecTTL (IPv4 checksum updated incrementally),
//	        pkt.SetMACs' rewrite, --dst-mac standing for the next hop that
//	        xdpfwd looks up; a packet that is malformed, not IP or whose
//	        TTL would expire is not kept (counted in "not_routed").
//	        --fill-frames N keeps N frames on the Fill ring
//	        (rxpath.Config.FillFrames) instead of the ring's size: the
//	        kernel copies each received frame into a recycled UMEM frame
//	        on the sending CPU, and fewer frames in circulation are
//	        warmer in its cache (less softirq time per packet there), at
//	        the price of less slack while the forwarder is not running
//	        (Fill ring empty: drops).
//	        With -o equal to -i and --out-queue equal to -q it is a
//	        hairpin, as xdpfwd on one interface: one socket with RX and TX
//	        rings, each received frame put on the same socket's TX ring
//	        (no copy), the same rewrite (with the sender's MAC as
//	        --dst-mac, the addresses swapped); "hairpin" in the JSON line.
//
// --runtime-sleep (rxdrop, fwd) sets rxpath.Config.RuntimeSleep: the
// Poller sleeps in the Go runtime's poller also while packets flow,
// instead of in ppoll on its own thread as xdpbench sleeps in poll(2).
// make bench's latency rows measure it beside the default.
//
// --prefetch (rxdrop, fwd) sets rxpath.Config.Prefetch: the Poller reads
// the cache lines of every packet's first 128 bytes for a whole batch
// before it hands the handler the first. make bench's latency receivers
// set it, as they read every packet's stamp; the rxdrop rows, whose
// handler reads no packet, do not.
//
// --latency (rxdrop) measures the one-way delay of xdpgen -timestamp's
// (or xdpbench --stamp's) packets as xdpbench --latency does (latency.go): the send time in the
// payload against CLOCK_TAI read once per batch the poller takes off the
// RX ring (at its first stamped packet), in a histogram
// allocated before the run; the JSON line adds "lat_samples",
// "lat_negative", "lat_p50_ns", "lat_p99_ns", "lat_p999_ns", "lat_max_ns",
// "cpu_ns" (the process's CPU time over the run) and "lat_deciles_ns"
// (p10 to p90).
//
// Defaults match xdpbench's: rings of 2048 entries, batch 64, 4096 frames
// of 4096 bytes, copy mode, need_wakeup on, native XDP. At the end it
// prints one JSON line on stdout with the fields of xdpbench's line (mode,
// frames, seconds, mpps, ...) plus "impl":"xdpkit" and "mallocs", the heap
// allocations of the whole process during the measured loop (0 expected):
// for txonly from the start of the loop to the end of the drain, for the
// receivers from the first packet to the last multiple of 16384 packets,
// and "mallocs_frames" says over how many packets (0: the run had fewer,
// and mallocs was not counted).
// The receivers add the poller's "rounds", "full_rounds" (rounds that
// used their whole budget: the RX ring held a backlog) and "sleeps"; fwd
// also its "wakeups" (sleeps ended by a packet, not a timeout) and
// "syscalls" (see rxpath.Stats), and both "ended": what ended the run
// ("signal", "count" or "duration"). "tx_budget" (txonly, fwd) is the
// XDP_MAX_TX_SKB_BUDGET the kernel took for --tx-budget (0: none), and
// "no_tx_budget" is true when one was asked and the kernel lacks it.
// Once set up it prints "xdpkitbench: ready" on stderr. SIGINT or SIGTERM
// end the run early, with a result.
//
// Kernel: Linux 5.10 or newer, as xdpbench; run as root. Example:
//
//	ip netns exec B xdpkitbench -m rxdrop -i vethB -q 0 -d 6
//	ip netns exec A xdpkitbench -m txonly -i vethA -s 64 -d 5 --dst-mac 02:00:00:00:00:02
package main
