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
//     peer that drops in XDP, RX-drop fed by the C txonly generator (the
//     same generator for both receivers), and forwarding gen -> fwd -> sink,
//     at 64 and 1500 bytes. Each case alternates the C reference
//     (bench/c/xdpbench) and xdpkit (bench/xdpkitbench), after one warm-up
//     run of each, -runs times (5) of -seconds (2); the generator or peer
//     runs on CPU 0, the measured program on CPU 1 (taskset). Reported: the
//     median Mpps of each and the xdpkit/C ratio.
//  2. The csum and nt micro-benchmarks (go test -bench on ./csum and ./nt,
//     pinned to CPU 1, best of -count) next to their C counterparts
//     bench/c/csumbench.c and bench/c/ntbench.c (gcc -O2 -mavx2): checksum
//     and copy at 1500 B and 64 KiB.
//  3. The copy-policy grid: sizes {64, 256, 1500, 4096, 65536} x {hot, cold
//     destination} x {offload, no offload}. Fixed methods: NT copy,
//     ordinary copy and the fused copy-and-sum with offload; NT copy + sum,
//     copy + sum and fused without; and auto (txpath.ChooseCopy, asked
//     once per batch of 64 copies). Each trial copies 1 MiB of payload into
//     UMEM-like memory (4 KiB frames, 4 KiB pages, the payload 42 bytes
//     into its frame, its source at 8 offsets spread over a page); hot: a
//     region of 256 KiB reused, cold: cycling through 64 MiB (twice the
//     L3). 601 rounds, each in its own random order, after nt's calibration
//     (saved to nt-calibration.json and handed to nt.Default) and
//     txpath.Prepare. Verdict per cell: the median over the rounds of
//     auto's GB/s over the best fixed method's in the same round must be at
//     least 0.97 (PASS/FAIL); the table also shows best-of-rounds GB/s.
//     Run pinned to CPU 1 on one locked thread.
//
// Outputs (in -out, default ../out): results.json, xdp.png (Mpps by mode
// and frame size, xdpkit and C), copy.png (GB/s by copy size for each copy
// method, hot and cold), nt-calibration.json and summary.md (the tables
// that README.md shows). It prints the tables and the elapsed time.
// -quick runs every case once, briefly (for CI). Run as root:
//
//	cd bench/harness && go run . -out ../out
//	cd bench/harness && go run . -quick -out ../out
package main
