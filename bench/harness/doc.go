// Command harness is `make bench`: it measures xdpkit side by side with the
// C reference in one run and writes the figures as JSON, plots and a table.
//
// It is a module of its own (bench/harness/go.mod) so that its plotting
// dependency, gonum.org/v1/plot, stays out of the library's go.mod.
//
// What it runs, in order:
//
//  1. AF_XDP on veth pairs in network namespaces created with test/vethns
//     (unique names, deleted at the end, also on Ctrl-C): TX-only into a
//     peer, RX-drop fed by the C txonly generator (the same generator for
//     both receivers), forwarding generator -> forwarder -> back into
//     the generator's namespace, and L3 forwarding (l3fwd: generator ->
//     port A of the forwarder, parsed, TTL decremented, IPv4 checksum
//     updated, out of port B into a third, sink namespace; xdpbench and
//     xdpkitbench fwd --l3), at 64 and 1500 bytes; RX-drop and
//     forwarding also at 64 B with the generator paced to 100 kpps, 300
//     kpps and 1 Mpps (xdpbench --rate). TX-only runs both TX strategies
//     in both programs: "sender" (kick after each batch until the kernel
//     took it: txpath.Sender, xdpbench --drain) and "ring" (keep the ring
//     full, kick when asked: xdpbench's default, xdpkitbench --tx ring).
//     Frames are counted outside the measured program: TX-only and
//     forwarding by an XDP program the harness attaches (counter.go; a
//     per-CPU array it reads before and after each run) on the TX peer,
//     on the return link and on the L3 sink's link; RX-drop by the
//     receiver, with the generator's
//     completions (loss) and the socket's XDP_STATISTICS beside it. The
//     harness reads /proc/stat (every CPU's user, sys, softirq, in 10 ms
//     ticks) and the programs' CPU time around the traffic (cpu.go) and
//     reports CPU-seconds per million counted packets. A program's total
//     is read in ns from its process CPU clock (sum_exec_runtime of all
//     its threads, exited ones included), or from the rusage of one that
//     has exited; the user/sys split beside it (/proc/PID/stat, rusage) is
//     tick-sampled, so at 100 kpps for 2 s only the total is finer than
//     0.05 CPU-s per million packets. Each case alternates the C
//     reference (bench/c/xdpbench) and xdpkit (bench/xdpkitbench), after
//     one warm-up run of each per frame size, -runs times (5) of -seconds
//     (2); the generator or peer runs on CPU 0, the measured program on
//     CPU 1 (taskset). Reported: medians over the runs and xdpkit/C, and
//     the efficiency goals (forwarding and RX-drop at maximum rate by
//     Mpps, RX-drop at 100 and 300 kpps by the receiver's CPU per packet)
//     with a verdict each and the range over the runs paired as they
//     alternated; the forwarding goals (fwd, hairpin, l3fwd) are against
//     the fastest C forwarder that ran the case (targets.go's fastestC).
//     The hairpin rows (fwd with -o equal to -i: one socket, frames back
//     out of the link they came in on) are counted by the XDP counter on
//     the generator's own link. Beside them, in the same rounds and on the same links,
//     xsksample (bench/c/xsksample.c: the AF_XDP sample program's shape,
//     xdpsock's modes, loops and defaults on libxdp; xsksample.go) runs
//     where it has a counterpart: txonly beside the "ring" rows (it sends
//     from the TX peer's other end into the same counter), rxdrop beside
//     the rxdrop rows without NAPI deferral (its own count), and l2fwd, a
//     hairpin, beside the hairpin rows at the maximum rate and beside fwd
//     at the fixed rates (it sends back on the link it receives on,
//     counted on the generator's link). Busy loop
//     at the maximum rate, poll(2) (-p) at the fixed rates; its table
//     gives its median (min-max) beside the C reference's and xdpkit's.
//     It needs libxdp-dev and libbpf-dev; -impl xsksample runs it alone.
//  2. The csum and nt micro-benchmarks (go test -bench on ./csum and ./nt,
//     pinned to CPU 1, best of -count) next to their C counterparts
//     bench/c/csumbench.c (gcc -O3 -march=native: scalar adc, AVX2 and,
//     where the CPU has it, AVX-512 kernels, each beside the Go kernel set
//     of its kind) and bench/c/ntbench.c (gcc -O2 -mavx2), both built by
//     bench/c/build.sh: checksum at 20 B-64 KiB (mid-page and page-end)
//     and copy at 1500 B and 64 KiB. Then the paired comparison
//     (paired.go): csum's TestPairedC, built with -tags csumcgo, times
//     Sum and CopyAndSum and csumbench.c's kernels (through cgo) in
//     alternating blocks of one process; the table gives per size the
//     median and 10th-90th percentiles of the per-block ratio against
//     the faster C kernel, and a verdict on the median.
//  3. The copy-policy grid (grid.go): sizes {64, 256, 1500, 4096, 65536}
//     x {hot, cold destination} x {offload, no offload}, in two layouts:
//     "seen" (4 KiB frames, payload 42 bytes in, cold ring 64 MiB: what
//     txpath.ChooseCopy measures at start-up) and "unseen" (2 KiB frames,
//     payload 298 bytes in, cold ring 48 MiB). Fixed methods: NT copy,
//     ordinary copy and the fused copy-and-sum with offload; NT copy +
//     sum, copy + sum, fused and copy + sum of the destination (a
//     candidate outside ChooseCopy's set) without; and auto (ChooseCopy,
//     asked once per batch of 64 copies), and auto's choice once more as
//     a fixed method (the twin, whose distance from the first copy is the
//     run's noise). After nt's calibration (saved to nt-calibration.json
//     and handed to nt.Default), three starts: each takes ChooseCopy's
//     start-up measurement (txpath.Prepare, then txpath.Remeasure) and
//     measures every cell in 201 rounds, each in its own random order.
//     Verdict per cell and start: for every fixed method the median over
//     the rounds of auto's GB/s over the method's in the same round; the
//     smallest must be at least 0.97 less the noise band. A cell passes
//     when it passes in most starts.
//     Run pinned to CPU 1 on one locked thread. A failing cell is reported,
//     and the run exits non-zero, after writing everything.
//  4. The wake-up cost comparison (wake.go, -only wake): a waiter pinned
//     to CPU 1 sleeps until a named pipe is readable, woken by a writer on
//     CPU 0 (bench/wakebench -m wake) that writes 10000 bytes one at a
//     time, 200 µs apart, about the wake-up rate of the 300 kpps NAPI
//     deferral row. C's waiter (bench/c/wakebench.c) sleeps in poll(2), as
//     xdpbench's receiver does; Go's (bench/wakebench) either on an epoll
//     set registered with the runtime's network poller, with a read
//     deadline, as an rxpath.Poller does when idle or with
//     Config.RuntimeSleep (-m wait), or in ppoll on its own thread, as a
//     Poller does by default while packets flow (-m wait-thread). Each reports its process CPU time, its wake-ups and
//     its context switches; the table gives the CPU per wake-up, min /
//     median / max over -runs rounds (each runs the three waiters once,
//     the first one rotating, after a warm-up round) and the spread of
//     each Go waiter's over C's, round by round. It measures the part of
//     the NAPI deferral rows' cost per wake-up that is the wake-up itself.
//  5. xdpgen's modes (genbench.go, -only gen): apps/xdpgen sends flat out
//     (-rate max) for -seconds into a veth peer whose frames the harness's
//     XDP counter counts, -runs times per row, pinned to CPU 1: plain UDP
//     at 64 B (txpath's UDPFlow path), TCP SYNs (74 B) from the field
//     engine over a random source port, and pcap replay of a file of 1000
//     64-byte frames, looped. No C counterpart: the table gives Mpps
//     counted at the peer, per run and their median.
//  6. One-way latency (latency.go, -only latency): the C reference's
//     txonly paced by the clock (--rate R --busy --stamp --drain) stamps
//     each frame with CLOCK_TAI as it submits it, one frame per kick
//     while it keeps up; at 100 kpps, 300 kpps and 1 Mpps, with and
//     without NAPI deferral, the C receiver in poll(2), the C receiver
//     spinning and xdpkit's default Poller take turns and report p50,
//     p99, p99.9 of the delay to when their code sees the packet, and
//     their CPU per packet (docs/benchmarks.md).
//
// Every full run appends one line to history.jsonl (commit, date, CPU,
// kernel, load average, the medians); the report ends with the spread
// across the kept runs on the same machine. With -readme, summary.md is
// also written into that README between <!-- bench:start --> and
// <!-- bench:end -->, byte for byte.
//
// Outputs (in -out, default ../out): results.json, history.jsonl, xdp.png (Mpps by mode
// and frame size, xdpkit and C), copy.png (GB/s by copy size for each copy
// method, hot and cold), nt-calibration.json and summary.md (the tables
// that README.md shows). It prints the tables and the elapsed time.
// -quick runs every case once, briefly (for CI). -modes picks AF_XDP
// modes, -match AF_XDP and latency cases by name, -impl one implementation, -bin keeps the built programs
// (for perf report), -nice runs both programs at another nice level,
// -goargs passes extra arguments to xdpkitbench as the measured receiver
// or forwarder (e.g. --max-delay=100us, not with -readme); a run narrowed
// by -only, -modes, -match or -impl, or with -goargs, does not touch the
// history. -render measures nothing and writes summary.md
// (and -readme) again from results.json. Run as root:
//
//	cd bench/harness && go run . -out ../out -readme ../../README.md
//	cd bench/harness && go run . -quick -out ../out
package main
