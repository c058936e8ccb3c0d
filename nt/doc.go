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
// # When NT stores pay
//
// An NT store to a line that is cached must evict it first, so into a hot
// destination (one buffer rewritten) NT is much slower than an ordinary
// copy. Into a cold destination NT skips the read-for-ownership an
// ordinary store pays, and wins from some size that depends on the CPU,
// the ring's size against the last-level cache, and the load on the
// machine: Calibrate measures it. SFENCE after NT stores costs some
// hundreds of ns when the stores go to memory, so fence once per batch,
// not per copy (BenchmarkCopy ring/nt-fence-each). The AVX-512, AVX2 and
// SSE2 kernels are alike on a cold copy: the store path to memory, not the
// vector width, is the limit. NT also pays when another core reads what
// was copied (BenchmarkProducerConsumer), and it leaves the copier's cache to its
// working set (BenchmarkPollution).
//
// The 256-byte cut-over of Copy comes from the calibration points: NT
// costs a multiple of an ordinary copy at 64-256 bytes even with one fence
// per 32 copies, and a copy below 256 bytes has at most three whole lines
// to stream. `make bench` prints the host's calibration above the
// copy-policy grid (bench/out/summary.md).
package nt
