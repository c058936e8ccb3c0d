package txpath

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/nt"
)

// Method is one way of moving a payload into a UMEM frame: how it is copied
// (ordinary or nontemporal stores) and, when the checksum is not offloaded,
// how the payload is summed.
type Method uint8

const (
	// MethodCopy copies with ordinary stores and does not sum: for an
	// offloaded (or unneeded) checksum.
	MethodCopy Method = iota
	// MethodNT copies with nontemporal stores (nt.Copy) and does not sum.
	MethodNT
	// MethodCopySum copies with ordinary stores, then sums the source
	// (csum.Sum): two passes.
	MethodCopySum
	// MethodNTSum copies with nontemporal stores, then sums the source.
	MethodNTSum
	// MethodFused copies and sums in one pass (csum.CopyAndSum).
	MethodFused
)

// Methods lists every Method, in order.
var Methods = []Method{MethodCopy, MethodNT, MethodCopySum, MethodNTSum, MethodFused}

// String names the method as Decision and the benchmarks print it.
func (m Method) String() string {
	switch m {
	case MethodCopy:
		return "copy"
	case MethodNT:
		return "nt"
	case MethodCopySum:
		return "copy+sum"
	case MethodNTSum:
		return "nt+sum"
	case MethodFused:
		return "fused"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Sums reports whether m computes the payload's checksum (the methods for
// a checksum that is not offloaded).
func (m Method) Sums() bool { return m >= MethodCopySum }

// NT reports whether m writes with nontemporal stores (and so needs an
// nt.Fence before the frame is published).
func (m Method) NT() bool { return m == MethodNT || m == MethodNTSum }

// Apply copies src into dst with m and returns sum plus the partial sum of
// src (for the methods that sum; sum unchanged for the others). Like
// csum.CopyAndSum it copies all of src and panics if dst is shorter. It
// does not fence: call nt.Fence once after a batch of NT copies.
func (m Method) Apply(dst, src []byte, sum uint32) uint32 {
	if len(dst) < len(src) {
		panic("txpath: Method.Apply: destination shorter than source")
	}
	switch m {
	case MethodNT:
		nt.Copy(dst, src)
	case MethodCopySum:
		copy(dst, src)
		sum = csum.Sum(src, sum)
	case MethodNTSum:
		nt.Copy(dst, src)
		sum = csum.Sum(src, sum)
	case MethodFused:
		sum = csum.CopyAndSum(dst, src, sum)
	default:
		copy(dst, src)
	}
	return sum
}

// ChooseCopy returns the method that moves a payload of size bytes into a
// UMEM frame fastest on this machine, as measured at start-up (into a
// cold frame from 256 B, with NT stores preferred: see below). coldDest says
// that the destination frame is not in the CPU's cache and will not be
// read back by the CPU (zero-copy: the NIC reads it by DMA, and the UMEM
// cycles through more frames than the cache holds); offload that the
// checksum is completed by the device, so the payload need not be
// summed. The Sender's Auto policy and the copy-policy grid of `make
// bench` both use it. It allocates nothing and costs a table lookup.
//
// It decides from measurements taken once per process, on first use
// (Prepare takes them ahead; a Sender with the Auto policy does so in New;
// Remeasure takes them again):
// every method copies payloads of 64 B to 64 KiB into UMEM-like memory: 4
// KiB frames with the payload 42 bytes (the UDP/IPv4 headers) into its
// frame, 4 KiB pages as umem.New maps them, the source at 8 offsets spread
// over a page in turn, NT copies fenced once per 64 as the Sender's
// batches are; hot: a 256 KiB region reused (it stays in the L2), 256 KiB
// of payload per timed trial; cold: cycling through 64 MiB (twice the L3
// of the development machine), 1 MiB of payload per trial (see
// coldTrialBytes), one size at a time (see measureFrames). The table
// keeps, per size and temperature, the fastest method with offload (copy, NT, or fused, whose sum is then unused) and
// without (fused, NT+sum or copy+sum), by paired time ratios over the
// rounds: the incumbent unless another is ahead by 2% at the low end of a
// 90% confidence interval of the median ratio. The incumbent is the plain
// or the fused copy, except into a cold destination from 256 B to 64 KiB,
// where it is NT stores (NT, or NT+sum), which skip the
// read-for-ownership that an ordinary store to an uncached line pays (see
// choose); without offload, where the answer with offload is NT (no other
// copy beat NT stores by 2%), another must beat NT + sum by 10%, not 2%
// (ntSumKeep). Below 256 B, where nt.Copy is the plain copy, and in builds
// without NT stores (nt.Supported false), the answer
// is never an NT method. A size between two measured ones takes the
// answer of the nearer by ratio; below 256 B, of the nearer measured size
// below 256 B.
// The first call measures for a noticeable time (hundreds of
// milliseconds, the mapping of the ring included, and nt.Default's
// calibration if that has not run yet): call Prepare at start-up to pay
// it there.
//
// Why measure rather than rule: the rule "NT stores from nt's threshold"
// is wrong for packets. The copy-policy grid of `make bench`
// (bench/out/summary.md; its spread across runs in bench/out/history.jsonl)
// measures NT stores against the ordinary copy into cold UMEM-like frames
// at packet sizes, in the layout measured here and in one it never saw,
// while nt's calibration (nt.Default), which copies into a contiguous ring
// where the hardware prefetcher hides the ordinary stores'
// read-for-ownership, gives a threshold that need not match the frames'
// and can move from run to run (the grid's report lists it). Without
// offload the grid also sets NT + a sum of the (cached) source against the
// fused copy-and-sum, into cold and into hot frames.
// Above 64 KiB, where a payload spans whole contiguous
// frames, nt's calibration decides: NT stores into a cold destination
// where nt.Default says NT wins at that size, else the 64 KiB answer
// without NT.
func ChooseCopy(size int, coldDest, offload bool) Method {
	t := chosen.Load()
	if t == nil {
		t = prepare()
	}
	return t.pick(size, coldDest, offload)
}

// Prepare measures what ChooseCopy needs now, so that its first call does
// not. It is idempotent.
func Prepare() { prepare() }

// Remeasure takes ChooseCopy's measurements of payloads up to 64 KiB
// again and replaces the table it answers from: for a program that runs
// long on a machine that may change under it (a virtual machine moved to
// other hardware, a new CPU frequency policy). It takes as long as those
// measurements took the first time, on the calling goroutine; other work on
// the same CPUs meanwhile disturbs them, as it would at start-up.
// ChooseCopy keeps answering from the old table until the new one is
// ready; Prepare and ChooseTable wait for it only if no table exists yet.
// Zero-copy Auto Senders already made get the new answers from their next
// packet (they ask ChooseCopy per packet), but their Decision, made in New,
// stays as it was. Above 64 KiB the answer still follows nt.Default's
// calibration, which a process makes once.
func Remeasure() {
	measureMu.Lock()
	defer measureMu.Unlock()
	chosen.Store(measureTable())
}

// table is ChooseCopy's answer, by destination temperature and size.
type table struct {
	// tab[d][o][size>>6] up to 64 KiB: the choice measured in that
	// 64-byte bucket, else at the measured size nearest (by ratio) to the
	// bucket's middle (below 256 B: the nearest below 256 B); d is 1 for
	// a cold destination, o 1 with offload.
	tab   [2][2][65536>>6 + 1]Method
	big   [2][2]Method // above 64 KiB: the 64 KiB answer, without NT
	ntBig int          // nt.Default's threshold (<= 0: never)
	// points are the measurements.
	points []TablePoint
}

// TablePoint is one measured size and destination of ChooseCopy's table.
type TablePoint struct {
	Size    int
	Cold    bool
	Ns      [5]float64 // best ns per copy, by Method
	Offload Method     // the chosen one of copy, NT, fused (see choose)
	Soft    Method     // the chosen one of fused, NT+sum, copy+sum
}

// ChooseTable returns the measurements behind ChooseCopy's answers
// (measuring them first if needed): hot sizes, then cold ones. The slice
// is shared; do not modify it.
func ChooseTable() []TablePoint { return prepare().points }

func (t *table) pick(size int, cold, offload bool) Method {
	d, o := 0, 0
	if cold {
		d = 1
	}
	if offload {
		o = 1
	}
	switch {
	case size <= 65536:
		return t.tab[d][o][max(size, 0)>>6]
	case cold && t.ntBig > 0 && size >= t.ntBig:
		if offload {
			return MethodNT
		}
		return MethodNTSum
	}
	return t.big[d][o]
}

var (
	chosen atomic.Pointer[table]
	// measureMu serializes the measurements (prepare, Remeasure).
	measureMu sync.Mutex
)

func prepare() *table {
	if t := chosen.Load(); t != nil {
		return t // without waiting for a Remeasure under way
	}
	measureMu.Lock()
	defer measureMu.Unlock()
	if t := chosen.Load(); t != nil {
		return t
	}
	t := measureTable()
	chosen.Store(t)
	return t
}

// measureTable measures ChooseCopy's table.
func measureTable() *table {
	hot := measureFrames(tableSizes, hotBytes, hotTrialBytes, false, 50*time.Millisecond)
	cold := measureFrames(tableSizes, coldBytes, coldTrialBytes, true, 150*time.Millisecond)
	return build(hot, cold, nt.Default().Threshold)
}

const (
	hotBytes  = 256 << 10 // a hot destination: this much UMEM, reused (fits the L2)
	coldBytes = 64 << 20  // a cold one: cycling through twice the L3 of the development machine

	hotTrialBytes = 256 << 10 // payload bytes per timed trial into a hot destination
	// coldTrialBytes is the payload per timed trial into a cold
	// destination, as in the copy-policy grid of make bench. Into cold
	// frames the methods' paired ratios depend on the trials' length:
	// with 256 KiB, NT + sum came out level with the fused copy-and-sum
	// at 4 KiB on a CPU where the grid, and each method run alone over
	// whole passes of the ring, find the fused copy ahead; with 1 MiB the
	// measured ratios agree with both (the choice between the two then
	// also weighs ntSumKeep).
	coldTrialBytes = 1 << 20
)

var tableSizes = []int{64, 128, 256, 512, 1024, 1500, 2048, 4096, 8192, 16384, 32768, 65536}

// build makes the lookup table from the measured points (each sorted by
// size, the same sizes).
func build(hot, cold []TablePoint, ntThreshold int) *table {
	t := &table{points: append(append([]TablePoint{}, hot...), cold...)}
	if nt.Supported {
		t.ntBig = ntThreshold // without NT stores, never NT
	}
	for d, pts := range [][]TablePoint{hot, cold} {
		// at returns the point whose size is nearest to size by ratio,
		// among those below nt.Copy's cut-over if below is set and there
		// are any.
		anyBelow := slices.ContainsFunc(pts, func(q TablePoint) bool { return q.Size < ntMin })
		at := func(size int, below bool) TablePoint {
			size = max(size, 1)
			p, best := pts[0], math.Inf(1)
			for _, q := range pts {
				if below && anyBelow && q.Size >= ntMin {
					continue
				}
				if r := math.Abs(math.Log(float64(q.Size) / float64(size))); r < best {
					p, best = q, r
				}
			}
			return p
		}
		for i := range t.tab[d][0] {
			// A bucket whose every size is below nt.Copy's cut-over
			// takes its answer from a measured size below it too
			// (choose gives those no NT answer), not from 256 B's, whose
			// answer into a cold destination prefers NT.
			below := i<<6+63 < ntMin
			p := at(i<<6+32, below)
			for _, q := range pts {
				if q.Size>>6 == i { // a measured size answers for its bucket
					p = q
				}
			}
			t.tab[d][0][i], t.tab[d][1][i] = p.Soft, p.Offload
			if below {
				// Whatever the point says, NT would be the ordinary copy
				// plus a fence here.
				t.tab[d][0][i], t.tab[d][1][i] = withoutNT(p.Soft), withoutNT(p.Offload)
			}
		}
		p := at(65536, false)
		t.big[d][0], t.big[d][1] = p.Soft, p.Offload
		if t.big[d][1] == MethodNT {
			t.big[d][1] = MethodCopy // NT above 64 KiB only on nt's word
		}
		if t.big[d][0] == MethodNTSum {
			t.big[d][0] = MethodFused
		}
	}
	return t
}

// withoutNT is m with ordinary stores in place of NT stores.
func withoutNT(m Method) Method {
	switch m {
	case MethodNT:
		return MethodCopy
	case MethodNTSum:
		return MethodCopySum
	}
	return m
}

const (
	frameStride = 4096
	payloadOff  = 42         // Ethernet + IPv4 + UDP
	fenceEvery  = 64         // the Sender's default batch
	ntMin       = nt.MinSize // nt.Copy's cut-over to NT stores
	srcSpan     = 4096       // payload sources start in the first page of a buffer...
	srcOffsets  = 8          // ...at 8 offsets, 520 bytes apart
)

// srcOffset is where the i-th payload of a trial starts in the source
// buffer: 0, 520, 1040, ... 3640, which covers every eighth of a page and
// every 8-byte alignment within a cache line.
func srcOffset(i int) int { return i % srcOffsets * (srcSpan/srcOffsets + 8) }

// trialHook, when set (by tests), sees each trial of measureFrames: its
// size and method.
var trialHook func(size int, m Method)

// measureFrames times every method at each size into a region of
// ringBytes laid out as UMEM frames (at least four payloads of the largest
// size), about trialBytes of payload per timed trial, for about budget
// (at least 5 rounds per size, at most 100), and returns the best time of
// each with the choices that the rounds' times give (choose). Into a hot
// destination every round takes the sizes in turn; into a cold one each
// size runs its rounds together, for an equal share of budget, after an
// untimed trial of every method.
func measureFrames(sizes []int, ringBytes, trialBytes int, cold bool, budget time.Duration) []TablePoint {
	maxStride := (payloadOff + sizes[len(sizes)-1] + frameStride - 1) / frameStride * frameStride
	ring, free := mapRing(max(ringBytes, 4*maxStride))
	defer free()
	pts := make([]TablePoint, len(sizes))
	// Payloads start at varying offsets of one buffer (srcOffset): how a
	// source lines up with a frame decides 4 KiB aliasing (a load stalled
	// behind a store to the same offset of another page), which makes the
	// sum kernels several times slower at some sizes and buffers.
	src := make([]byte, sizes[len(sizes)-1]+srcSpan)
	for j := range src {
		src[j] = byte(j*7 + 1)
	}
	for i, s := range sizes {
		pts[i].Size, pts[i].Cold = s, cold
		for m := range pts[i].Ns {
			pts[i].Ns[m] = -1
		}
	}
	pos := 0
	var sum uint32
	trial := func(s int, m Method) float64 {
		if trialHook != nil {
			trialHook(s, m)
		}
		stride := (payloadOff + s + frameStride - 1) / frameStride * frameStride
		k := (max(8, trialBytes/s) + srcOffsets - 1) / srcOffsets * srcOffsets
		if !cold {
			// One untimed pass over the region first: the previous trial
			// may have evicted it with NT stores.
			for i := 0; i < len(ring)/stride; i++ {
				m.Apply(ring[i*stride+payloadOff:i*stride+payloadOff+s], src[:s], 0)
			}
			nt.Fence()
			pos = 0
		}
		start := time.Now()
		for i := 0; i < k; i++ {
			if pos+stride > len(ring) {
				pos = 0
			}
			off := srcOffset(i)
			sum = m.Apply(ring[pos+payloadOff:pos+payloadOff+s], src[off:off+s], sum)
			pos += stride
			if m.NT() && (i+1)%fenceEvery == 0 {
				nt.Fence()
			}
		}
		if m.NT() {
			nt.Fence()
		}
		return float64(time.Since(start).Nanoseconds()) / float64(k)
	}
	// times[i][m] are the per-round times of method m at size i.
	times := make([][5][]float64, len(pts))
	// Each round runs the methods in its own random order (fixed seed), so
	// that every method follows every other equally often: a trial leaves
	// write-combining buffers and memory queues as the next one finds them.
	rng := rand.New(rand.NewPCG(uint64(len(pts)), 1))
	order := slices.Clone(Methods)
	round := func(i int) {
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, m := range order {
			ns := trial(pts[i].Size, m)
			times[i][m] = append(times[i][m], ns)
			if old := pts[i].Ns[m]; old < 0 || ns < old {
				pts[i].Ns[m] = ns
			}
		}
	}
	if cold {
		// Into a cold destination a trial finds the memory system as the
		// trials before it left it (lines still to be written back, full
		// queues), and a trial of another size leaves another state than
		// one of the same size. So each size runs its rounds together,
		// after an untimed trial of every method, as a Sender with a
		// steady payload size copies and as the copy-policy grid of make
		// bench measures. Each size has an equal share of budget, so the
		// sizes whose trials take less time get more rounds: the largest,
		// where NT stores and the ordinary copy are closest, the most.
		per := budget / time.Duration(len(pts))
		for i := range pts {
			for _, m := range Methods {
				trial(pts[i].Size, m)
			}
			// Each size its own shuffles, whatever the others ran.
			rng = rand.New(rand.NewPCG(uint64(pts[i].Size), 1))
			t0 := time.Now()
			for r := 0; r < 5 || (r < 100 && time.Since(t0) < per); r++ {
				round(i)
			}
		}
	} else {
		t0 := time.Now()
		for r := 0; r < 5 || (r < 100 && time.Since(t0) < budget); r++ {
			for i := range pts {
				round(i)
			}
		}
	}
	runtime.KeepAlive(sum) // the sums must be computed
	for i := range pts {
		pts[i].choose(&times[i], nt.Supported)
	}
	return pts
}

// choose sets p.Offload and p.Soft from the per-round times of each method
// at p's size and temperature, by paired ratios (see fastest), never by
// the best times (p.Ns, which the table reports): into cold frames the
// best trial of NT + sum can take far less time than its typical one
// while the fused copy-and-sum's best stays near its typical, so best
// times can rank NT + sum first where every trial but a few finds it
// behind. ntStores says whether NT stores are real (nt.Supported in this
// build):
//
//   - into a hot destination from 256 B: with the plain copy (offload) or
//     the fused copy-and-sum (no offload) as the incumbent, which another
//     (NT or fused; NT + sum or copy + sum) must beat by switchGain;
//   - into a cold destination from 256 B: the same, with NT stores (NT,
//     or NT + a sum of the source) as the incumbent: they skip the
//     read-for-ownership that an ordinary store to an uncached line pays.
//     Without offload, where the offload answer is NT (no other copy beat
//     NT stores by switchGain: skipping the read-for-ownership pays at
//     this size), another must beat NT + sum by ntSumKeep, not switchGain
//     (see there);
//   - below nt's cut-over (256 B), where nt.Copy copies with the builtin
//     copy (NT is the ordinary copy plus a fence there, whatever the noise
//     says), and wherever NT stores are not real: the same, without the
//     NT methods.
func (p *TablePoint) choose(times *[5][]float64, ntStores bool) {
	switch {
	case p.Size < ntMin || !ntStores:
		p.Offload = fastest(times, MethodCopy, MethodFused)
		p.Soft = fastest(times, MethodFused, MethodCopySum)
	case p.Cold:
		p.Offload = fastest(times, MethodNT, MethodCopy, MethodFused)
		keep := switchGain
		if p.Offload == MethodNT {
			keep = ntSumKeep
		}
		p.Soft = fastestKeep(times, keep, MethodNTSum, MethodFused, MethodCopySum)
	default:
		p.Offload = fastest(times, MethodCopy, MethodNT, MethodFused)
		p.Soft = fastest(times, MethodFused, MethodNTSum, MethodCopySum)
	}
}

// fastest returns the fastest candidate by paired comparison: for each
// pair, the ratio of their times in the same round (trials of one round
// see the same interference from other work, so the ratio is steadier
// than either time). The first candidate is the incumbent (see choose):
// another replaces the current choice only if it is faster by switchGain
// at the low end of a 90% confidence interval of the median ratio
// (medianLow), not just at the median. The rounds' ratios spread widely at
// some sizes (at cold 256 B the slower tenth and the faster tenth of the
// rounds can disagree on which method wins), and a median of 30 rounds
// then falls on either side of a tie by chance.
func fastest(times *[5][]float64, cand ...Method) Method {
	return fastestKeep(times, switchGain, cand...)
}

// fastestKeep is fastest with keep in place of switchGain for a challenger
// to the incumbent (cand[0]) itself.
func fastestKeep(times *[5][]float64, keep float64, cand ...Method) Method {
	best := cand[0]
	for _, m := range cand[1:] {
		gain := switchGain
		if best == cand[0] {
			gain = keep
		}
		a, b := times[best], times[m]
		n := min(len(a), len(b))
		if n == 0 {
			continue
		}
		r := make([]float64, n)
		for i := range r {
			r[i] = a[i] / b[i] // > 1: m is faster
		}
		slices.Sort(r)
		if r[medianLow(n)]*(1-gain) > 1 {
			best = m
		}
	}
	return best
}

const (
	switchGain = 0.02
	// ntSumKeep is how much faster than NT + sum (at the low end of the
	// interval) another method must be to replace it into a cold
	// destination where NT stores are the answer with offload: more than
	// switchGain, because there the two ways of being wrong cost
	// differently, and the start-up measurement can be wrong by more than
	// its interval says. NT + sum against the fused copy-and-sum is NT
	// stores without a read-for-ownership plus a second pass over the
	// cached source, against one pass with ordinary stores: a near tie
	// whose order follows the state of the memory system, which on a busy
	// host changes within seconds, so that a choice made at start-up can
	// be wrong either way later. Taking the fused copy where NT + sum is
	// the quicker costs more than the other mistake, because the fused
	// copy pays the read-for-ownership of every line. The copy-policy grid
	// of make bench shows both, per start (its report, and each cell's
	// starts in results.json). So a challenger must be clearly quicker;
	// where it is quicker by less, the grid's 3% gate can fail. Where NT
	// stores are not the answer with offload (small payloads), NT + sum is
	// no better placed than the others and gets no such margin.
	ntSumKeep = 0.10
)

// medianLow is the index, in n sorted values, of the lower end of a
// two-sided 90% confidence interval of their median by the sign test: the
// largest k with P(B <= k) <= 5% for B binomial(n, 1/2), so that the
// (k+1)-th smallest value is below the median with at least 95%
// probability; 0 (the smallest value) when n is too small for any. For
// example 0 up to n = 7, 10 for 31, 41 for 100. n is at most 100 here
// (measureFrames' rounds); P(B = 0) underflows from n = 1075.
func medianLow(n int) int {
	k := 0
	p := math.Pow(0.5, float64(n)) // P(B = 0)
	cdf := p
	for i := 0; i < n; i++ {
		p = p * float64(n-i) / float64(i+1) // P(B = i+1)
		if cdf+p > 0.05 {
			break
		}
		cdf += p
		k = i + 1
	}
	return k
}

// mapRing maps n bytes of anonymous memory the way umem.New does (4 KiB
// pages: a UMEM has huge pages only when asked), populated up front; on
// failure it falls back to the heap.
func mapRing(n int) ([]byte, func()) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		b = make([]byte, n)
		return b, func() {}
	}
	return b, func() { _ = unix.Munmap(b) }
}

// autoCopy is the copy the Auto policy uses for an n-byte payload:
// ChooseCopy's answer, except that copy mode never gets NT stores, whatever
// the table says. The kernel copies a copy-mode frame out of the UMEM on
// this CPU during the kick, so NT stores would push to memory what is read
// back at once; the destination counts as hot there, and a hot NT win in
// the table would be noise.
func (s *Sender) autoCopy(n int, offload bool) Method {
	if !s.dec.ZeroCopy {
		// Copy mode: the kernel copies the frame out at once on this
		// CPU, so the destination is hot and NT stores never pay
		// (enforced). What is left of ChooseCopy's hot answers is fixed:
		// an ordinary copy under offload, the fused copy-and-sum
		// otherwise (it beats or equals copy + sum, and replaces NT +
		// sum). So copy mode needs no measurement at all.
		if offload {
			return MethodCopy
		}
		return MethodFused
	}
	return ChooseCopy(n, true, offload)
}
