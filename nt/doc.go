// Package nt copies with nontemporal (cache-bypassing) stores, and measures
// when that pays on the machine it runs on.
//
// Payload that the CPU will not read again, because a NIC reads it by DMA,
// need not evict the application's working set from the cache: Linux's
// tx-nocache-copy (2011) and the MSG_NTCOPY proposal (2022) are the idea.
// But nontemporal (NT) stores are not free: they go to memory rather than to
// the cache, a fence that waits for them costs hundreds of nanoseconds, and
// an NT store to a line that is in the cache is slower than an ordinary one.
// Whether they pay depends on the machine, the size and the fencing, so this
// package measures it (Calibrate) and lets the caller decide (UseNT).
//
// # Copy and Fence
//
// Copy(dst, src) is like the builtin copy: it copies min(len(dst), len(src))
// bytes and returns the count. On amd64 the whole 64-byte lines of dst are
// written with NT stores (AVX-512, AVX2 or SSE2, chosen once from CPUID) and
// the partial lines at either end with ordinary stores; source loads are
// ordinary. Copies shorter than 256 bytes and overlapping copies use the
// builtin copy. Under the purego build tag and on other architectures Copy
// is the builtin copy and Fence does nothing (Supported is false).
//
// NT stores are weakly ordered: another core or a device may observe them
// after stores that follow them in program order. Copy does not fence, so
// that a batch of copies pays for one fence: call Fence (SFENCE) once after
// the batch and before the data is published to another core or to a
// device. For AF_XDP that means before the TX ring's producer index is
// stored. Publishing NT-copied data before Fence is a bug, even if it seems
// to work: the reader may see stale bytes.
//
// SFENCE orders the stores of the thread that executes it. Run Copy and the
// Fence that covers it on the same OS thread: a goroutine that is not locked
// with runtime.LockOSThread can be moved to another thread between them.
// (The runtime executes locked instructions on the old thread when it moves
// a goroutine, and Intel documents those as ordering all earlier stores; do
// not rely on it.) A TX goroutine that busy-polls is locked anyway.
//
// Go's own copy already uses NT stores on amd64 with AVX for non-overlapping
// copies of 1 MiB and more (runtime/memmove_amd64.s), and fences them itself.
// The "ordinary" baseline of this package's calibration and benchmarks
// therefore copies in 256 KiB pieces.
//
// # Calibration
//
// Calibrate measures, for sizes from 64 bytes to 1 MiB, ordinary copy against
// NT copy with one Fence per 32 copies, the source hot and the destination
// cycling through a 64 MiB ring (twice the 32 MiB L3 that one core of the
// development machine sees, so every destination line is cold). Each round
// times both copies back to back at every size; a size's speedup is the
// median over the rounds of the ordinary/NT time ratio, which other
// processes disturb less than either time. The threshold is the smallest
// size at which NT won by 5% or more with no loss of more than 5% at any
// larger size, or Never. The ring is mmap'd with transparent huge pages, so
// that faulting it in takes a few ms rather than over 100 ms as with 4 KiB
// pages in a VM. Calibration.Took and Setup report the time spent.
//
// Default returns a process-wide calibration, measured once on first use,
// or loaded from the file named by $XDPKIT_NT_CALIBRATION (written by
// Calibration.Save) if that file was taken on the same CPU model and NT
// implementation: measure once on a quiet machine, Save, and point the
// variable at the file, since a calibration taken while other work loads the
// machine can move (see below). txpath's auto policy uses it as: NT only from the size
// where calibration says it wins (Calibration.UseNT), and only when the
// destination is read by DMA (zero-copy mode), never in copy mode, where the
// kernel reads the frame back with the CPU.
//
// # What this machine gives
//
// Measured on the development machine: a 2-vCPU VM on an AMD EPYC of family
// 26 (Zen 5, "Turin-like"), 48 KiB L1d and 1 MiB L2 per core, an L3 cliff
// between 16 and 32 MiB rings; AVX-512. Up to four other builds and
// tests shared the two CPUs throughout, so single runs varied by 2-10x: the
// figures are best-of-N (N = 17-23 runs of 0.2-1 s) and, for calibration,
// the median over rounds of paired ratios. Speedups are ordinary time / NT
// time.
//
//   - Calibrate (cold 64 MiB ring, fence per 32, 11 runs with the
//     median-ratio rule): NT loses at every size up to 8 KiB, in every run:
//     x0.31-0.44 at 64 B, x0.40-0.52 at 256 B, x0.55-0.70 at 512 B,
//     x0.54-0.93 at 4 KiB, x0.61-0.95 at 8 KiB (1500 B is the odd one,
//     x0.86-1.0 and once 2.4, perhaps because its partial last line is an
//     ordinary store that breaks the NT stream). From 16 KiB up
//     it ties or swings with the load: x0.78-1.05 at 16 KiB, x0.73-1.19 at
//     64 KiB, x0.67-1.13 at 256 KiB, x0.87-1.13 at 1 MiB. Threshold: Never in
//     6 runs, 64 KiB in 2, 256 KiB in 1, 1 MiB in 2. Took 28-48 ms, of which
//     set-up 3-15 ms; 130-330 ms when faulting the ring in was slow (a VM
//     backing fresh memory).
//   - Each-copy fence (BenchmarkCopy ring/nt-fence-each): 1500 B 202 ns
//     against 60 ns ordinary, 4 KiB 366 against 206 ns: SFENCE after NT
//     stores to memory costs about 150-300 ns here.
//   - Hot destination (one buffer rewritten): NT is much slower, as an NT
//     store to a cached line must evict it first: 1500 B 178 against 31 ns
//     (x0.17), 64 KiB 3.0 against 1.2 us, 1 MiB 37 against 31 us.
//   - Cold ring, fence per 32, best of 23: 1500 B 52 against 60 ns, 4 KiB 151
//     against 206 ns, 64 KiB 2.65 against 3.22 us, 1 MiB 31 against 46 us,
//     16 MiB 1.17 against 1.05 ms (builtin copy, NT itself: 1.11 ms). The
//     medians of the same runs disagree at 4 KiB and 1 MiB; trust the
//     calibration's paired ratios over these.
//   - The AVX-512, AVX2 and SSE2 kernels are equal within the noise on a
//     cold 64 KiB copy (best 2.6, 3.3 and 2.2 us): the store path to memory,
//     not the vector width, is the limit.
//   - Cross-core producer/consumer (CPUs 0 and 1, 8 MiB ring, the consumer
//     reads every byte): 1 MiB objects 177 Gb/s NT against 53-71 Gb/s
//     ordinary (best; medians 21 and 9 Gb/s), 1500 B packets published per 32:
//     78 against 69 Gb/s (best). NT wins here, as on the AMD EPYC of
//     MSG_NTCOPY (+43%) and unlike the Intel Xeon of issue 4.
//   - Cache pollution (BenchmarkPollution, 512 x 1500 B copied between reads
//     of the working set): a 512 KiB working set is read in 16.0 us after NT
//     copies against 24.0 us after ordinary ones (best; medians 28.5 and 38.3
//     us); a 1 MiB working set, which does not fit in the 1 MiB L2 anyway,
//     was read more slowly after NT copies (38.3 against 31.0 us best,
//     medians 67.6 and 47.0 us), which is not explained.
//
// The 256-byte cut-over of Copy comes from the calibration points: NT costs
// 2-3x an ordinary copy at 64-256 bytes even with one fence per 32 copies
// (x0.31-0.52), and a copy below 256 bytes has at most three whole lines to
// stream. On this machine the calibration keeps txpath's auto policy off for
// packets (NT never won below 16 KiB on one core, and above that the answer
// moved with the load), although NT did win across cores; another machine
// may answer otherwise, which is why it is measured.
package nt
