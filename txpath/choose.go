package txpath

import (
	"fmt"
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
// UMEM frame fastest on this machine. coldDest says that the destination
// frame is not in the CPU's cache and will not be read back by the CPU
// (zero-copy: the NIC reads it by DMA, and the UMEM cycles through more
// frames than the cache holds); offload that the checksum is completed by
// the device, so the payload need not be summed. The Sender's Auto policy
// and the copy-policy grid of `make bench` both use it. It allocates
// nothing and costs a table lookup.
//
// It decides from measurements taken once per process, on first use
// (Prepare takes them ahead; a Sender with the Auto policy does so in New):
// every method copies payloads of 64 B to 64 KiB into UMEM-like memory, 4
// KiB frames with the payload 42 bytes (the UDP/IPv4 headers) into its
// frame, NT copies fenced once per 64 as the Sender's batches are; hot: a
// 256 KiB region reused (it stays in the L2); cold: cycling through 64 MiB
// (twice the L3 of the development machine). The table keeps, per size
// and temperature, the fastest method with offload (copy, NT or fused,
// whose sum is then unused) and without (fused, NT+sum or copy+sum), by
// the best time over the rounds; a size between two measured ones takes
// the answer of the smaller. About 50-150 ms, the ring mapping included.
//
// Why measure rather than rule: on the development machine (AMD EPYC
// Zen 5, AVX-512) the rules one would write are wrong in places. NT stores
// won into cold 4 KiB-strided frames from 256-512 B (x1.6-1.8 at 1500 B),
// although nt's own calibration (nt.Default), which copies into a
// contiguous ring where the hardware prefetcher hides the ordinary stores'
// read-for-ownership, put its threshold at 64 KiB or never. And into a hot
// destination the fused AVX-512 csum.CopyAndSum beat the builtin copy at
// 1500 B (x1.2) though it also sums, while at 4 KiB it was 4x slower.
// Above 64 KiB, where a payload spans whole contiguous frames, nt's
// calibration decides: NT stores into a cold destination where nt.Default
// says NT wins at that size, else the 64 KiB answer without NT.
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

// table is ChooseCopy's answer, by destination temperature and size.
type table struct {
	// small[d][o][size>>6] for sizes below 1 KiB, mid[d][o][size>>10] up
	// to 64 KiB; d is 1 for a cold destination, o 1 with offload.
	small [2][2][16]Method
	mid   [2][2][65]Method
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
	Offload Method     // the fastest of copy, NT, fused
	Soft    Method     // the fastest of fused, NT+sum, copy+sum
}

// ChooseTable returns the measurements behind ChooseCopy's answers
// (measuring them first if needed).
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
	case size < 1024:
		return t.small[d][o][max(size, 0)>>6]
	case size <= 65536:
		return t.mid[d][o][size>>10]
	case cold && t.ntBig > 0 && size >= t.ntBig:
		if offload {
			return MethodNT
		}
		return MethodNTSum
	}
	return t.big[d][o]
}

var (
	chosen      atomic.Pointer[table]
	prepareOnce sync.Mutex
)

func prepare() *table {
	prepareOnce.Lock()
	defer prepareOnce.Unlock()
	if t := chosen.Load(); t != nil {
		return t
	}
	hot := measureFrames(tableSizes, hotBytes, false, 15*time.Millisecond)
	cold := measureFrames(tableSizes, coldBytes, true, 30*time.Millisecond)
	t := build(hot, cold, nt.Default().Threshold)
	chosen.Store(t)
	return t
}

const (
	hotBytes  = 256 << 10 // a hot destination: this much UMEM, reused (fits the L2)
	coldBytes = 64 << 20  // a cold one: cycling through twice the L3 of the development machine
)

var tableSizes = []int{64, 128, 256, 512, 1024, 1500, 2048, 4096, 8192, 16384, 32768, 65536}

// build makes the lookup table from the measured points (each sorted by
// size, the same sizes).
func build(hot, cold []TablePoint, ntThreshold int) *table {
	t := &table{points: append(append([]TablePoint{}, hot...), cold...), ntBig: ntThreshold}
	for d, pts := range [][]TablePoint{hot, cold} {
		at := func(size int) TablePoint {
			p := pts[0]
			for _, q := range pts {
				if q.Size <= size {
					p = q
				}
			}
			return p
		}
		for i := range t.small[d][0] {
			p := at(i << 6)
			t.small[d][0][i], t.small[d][1][i] = p.Soft, p.Offload
		}
		for i := range t.mid[d][0] {
			p := at(i << 10)
			t.mid[d][0][i], t.mid[d][1][i] = p.Soft, p.Offload
		}
		p := at(65536)
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

const (
	frameStride = 4096
	payloadOff  = 42 // Ethernet + IPv4 + UDP
	fenceEvery  = 64 // the Sender's default batch
	trialBytes  = 512 << 10
)

// measureFrames times every method at each size into a region of
// ringBytes laid out as UMEM frames (at least four payloads of the largest
// size), for about budget (at least 5 rounds), and returns the best time
// of each.
func measureFrames(sizes []int, ringBytes int, cold bool, budget time.Duration) []TablePoint {
	maxStride := (payloadOff + sizes[len(sizes)-1] + frameStride - 1) / frameStride * frameStride
	ring, free := mapRing(max(ringBytes, 4*maxStride))
	defer free()
	pts := make([]TablePoint, len(sizes))
	srcs := make([][]byte, len(sizes)) // a payload buffer of each size
	for i, s := range sizes {
		pts[i].Size, pts[i].Cold = s, cold
		for m := range pts[i].Ns {
			pts[i].Ns[m] = -1
		}
		srcs[i] = make([]byte, s)
		for j := range srcs[i] {
			srcs[i][j] = byte(j*7 + 1)
		}
	}
	pos := 0
	var sum uint32
	trial := func(src []byte, m Method) float64 {
		s := len(src)
		stride := (payloadOff + s + frameStride - 1) / frameStride * frameStride
		k := max(4, trialBytes/s)
		start := time.Now()
		for i := 0; i < k; i++ {
			if pos+stride > len(ring) {
				pos = 0
			}
			sum = m.Apply(ring[pos+payloadOff:pos+payloadOff+s], src, sum)
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
	t0 := time.Now()
	for round := 0; round < 5 || (round < 50 && time.Since(t0) < budget); round++ {
		for i := range pts {
			for j := range Methods {
				// Rotate the order so that no method always follows the
				// same one.
				m := Methods[(j+round)%len(Methods)]
				ns := trial(srcs[i], m)
				if old := pts[i].Ns[m]; old < 0 || ns < old {
					pts[i].Ns[m] = ns
				}
			}
		}
	}
	sumSink = sum
	for i := range pts {
		p := &pts[i]
		p.Offload = fastest(p.Ns, MethodCopy, MethodNT, MethodFused)
		p.Soft = fastest(p.Ns, MethodFused, MethodNTSum, MethodCopySum)
	}
	return pts
}

// fastest returns the candidate with the lowest time; the first on ties.
func fastest(ns [5]float64, cand ...Method) Method {
	best := cand[0]
	for _, m := range cand[1:] {
		if ns[m] > 0 && ns[m] < ns[best] {
			best = m
		}
	}
	return best
}

// mapRing maps n bytes of anonymous memory, asks for transparent huge pages
// (faulting 64 MiB of 4 KiB pages in takes over 100 ms in a VM) and faults
// it in; on failure it falls back to the heap.
func mapRing(n int) ([]byte, func()) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b = make([]byte, n)
		return b, func() {}
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b, func() { _ = unix.Munmap(b) }
}

var sumSink uint32
