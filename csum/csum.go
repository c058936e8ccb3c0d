package csum

import (
	"math/bits"
	"unsafe"
)

// maxChunk bounds how much one call into a kernel sums, so that the
// assembly kernels' 64-bit lane accumulators can never overflow (see
// sum_amd64.s). Larger slices are summed in chunks of this size; the chunk
// size is even, so the word pairing is not disturbed. A variable so that
// a test can make it small.
var maxChunk = 1 << 30

// Sum returns the partial sum of b added to initial: the ones'-complement
// sum of b read as big-endian 16-bit words, a final odd byte padded with a
// zero byte. b may have any length and any alignment. The result is a
// partial sum, not yet folded or complemented: pass it to further Sum,
// Add or Combine calls, or to Fold, Finish or FinishUDP. Pass 0 as initial
// to start a new sum.
//
// If b does not start at an even offset of the data being checksummed,
// sum it on its own (initial 0) and add it with Combine.
func Sum(b []byte, initial uint32) uint32 {
	// Small enough to be inlined: the caller calls the assembly entry
	// directly (see sum_amd64.s), and adds the initial value here, after
	// the call (Add, written so that Sum fits the inlining budget): a
	// chain of dependent sums waits for this add and the caller's own
	// save of the value across the call, not for the assembly's argument
	// and result slots.
	x := uint64(sum(unsafe.SliceData(b), len(b))) + uint64(initial)
	return uint32(x) + uint32(x>>32)
}

// sumSlow is sum (toBE of the sum of the n bytes at p) without assembly,
// and for slices longer than maxChunk: those are summed in chunks of
// maxChunk bytes (an even length, so the partial sums of the chunks add
// up with Add).
func sumSlow(p *byte, n int) uint32 {
	b := unsafe.Slice(p, n)
	var s uint32
	for len(b) > maxChunk {
		s = Add(s, sum(&b[0], maxChunk))
		b = b[maxChunk:]
	}
	if useAsm {
		return Add(s, sum(unsafe.SliceData(b), len(b)))
	}
	if len(b) < smallMax && useSmall {
		return Add(s, toBE(sumSmall(b, 0)))
	}
	return Add(s, toBE(sumGo(b, 0)))
}

// CopyAndSum copies src into dst and returns the partial sum of the copied
// bytes added to initial, reading src once: Sum(src, initial) with the side
// effect of copy(dst, src). It copies all of src, so dst must be at least
// as long as src; like cipher.Stream's XORKeyStream it panics when dst is
// shorter, because a checksum over a silently truncated copy would be
// wrong. dst and src must not overlap, except exactly (dst and src the
// same slice).
func CopyAndSum(dst, src []byte, initial uint32) uint32 {
	// Small enough to be inlined: the caller calls the assembly entry
	// directly, as for Sum.
	if len(dst) < len(src) {
		panic("csum: CopyAndSum: dst shorter than src")
	}
	return copyAndSum(unsafe.SliceData(dst), unsafe.SliceData(src), len(src), initial)
}

// copySumSlow is copyAndSum (CopyAndSum of the n bytes at src into dst)
// without assembly, and for slices longer than maxChunk, which it copies
// and sums in chunks of maxChunk bytes.
func copySumSlow(d, s *byte, n int, initial uint32) uint32 {
	dst, src := unsafe.Slice(d, n), unsafe.Slice(s, n)
	for len(src) > maxChunk {
		initial = copyAndSum(&dst[0], &src[0], maxChunk, initial)
		dst, src = dst[maxChunk:], src[maxChunk:]
	}
	if useAsm {
		// Not slow again: len(src) <= maxChunk.
		return copyAndSum(unsafe.SliceData(dst), unsafe.SliceData(src), len(src), initial)
	}
	if len(src) < smallMax && useSmall {
		copy(dst, src)
		return Add(toBE(sumSmall(src, 0)), initial)
	}
	return Add(toBE(copySumGo(dst[:len(src)], src, 0)), initial)
}

// toBE folds a 64-bit accumulator of little-endian words to a 32-bit
// partial sum of big-endian words. Every kernel, Go and assembly, ends the
// same way: toBE of the data's accumulator, summed from 0, then Add of the
// initial value, so that a chain of dependent sums waits for two
// instructions per call, and all kernels return the same value. Both steps keep the value's residue
// modulo 0xFFFF (apart from the byte swap) and keep a non-zero value
// non-zero.
func toBE(acc uint64) uint32 {
	s, c := bits.Add32(uint32(acc), uint32(acc>>32), 0)
	s += c // cannot carry again: s <= 0xFFFFFFFE when c is 1
	// Swapping the bytes of every 16-bit word is a multiplication by
	// 2^8 modulo 0xFFFF, which a rotation of the 32-bit value by 8 is too.
	return bits.RotateLeft32(s, 8)
}

// Add returns the ones'-complement sum of two partial sums of data that
// start at even offsets (for a piece at an odd offset use Combine).
func Add(a, b uint32) uint32 {
	s, c := bits.Add32(a, b, 0)
	return s + c
}

// Combine adds to sum the partial sum next of a piece of data that starts
// off bytes into the data that sum covers: a packet summed piece by piece,
// with sum the running partial sum, next = Sum(piece, 0) and off the
// number of bytes before the piece. When off is odd the piece's words are
// the other way round, so next is byte-swapped before it is added.
//
//	s := csum.Sum(p[:n], 0)
//	s = csum.Combine(s, csum.Sum(p[n:], 0), n) // == csum.Sum(p, 0) after Fold
func Combine(sum, next uint32, off int) uint32 {
	if off&1 != 0 {
		next = bits.RotateLeft32(next, 8)
	}
	return Add(sum, next)
}

// Fold folds a partial sum to 16 bits with end-around carries. The result
// is the ones'-complement sum proper: 0 only when every summed word (and
// initial) was zero, else in 1..0xFFFF (0xFFFF being "minus zero").
func Fold(sum uint32) uint16 {
	s := sum&0xffff + sum>>16 // <= 0x1FFFE
	s = s&0xffff + s>>16      // <= 0xFFFF
	return uint16(s)
}

// Finish folds a partial sum and complements it: the value to store,
// big-endian, in a checksum field (IPv4 header, ICMP, TCP). Data whose
// checksum field holds the right value sums (with the pseudo-header where
// there is one) to a partial sum whose Finish is 0.
func Finish(sum uint32) uint16 { return ^Fold(sum) }

// FinishUDP is Finish for UDP over IPv4 and IPv6: a computed 0 is sent as
// 0xFFFF, because 0 in the UDP checksum field means "no checksum" (RFC 768;
// RFC 8200 section 8.1 keeps the rule for IPv6, where 0 is not allowed).
func FinishUDP(sum uint32) uint16 {
	c := ^Fold(sum)
	if c == 0 {
		return 0xffff
	}
	return c
}

// Checksum returns Finish(Sum(b, initial)): the checksum of b, ready to be
// stored big-endian.
func Checksum(b []byte, initial uint32) uint16 { return Finish(Sum(b, initial)) }

// Update16 returns the checksum field value after a 16-bit word of the
// covered data (at an even offset) changed from old to new, given the
// field's value sum before the change: RFC 1624 equation 3,
// HC' = ~(~HC + ~m + m'), which, unlike RFC 1141's HC' = HC + m - m',
// never produces the -0 that a full recomputation would not. The
// forwarder's TTL decrement, for an IPv4 header h:
//
//	old := binary.BigEndian.Uint16(h[8:]) // TTL, protocol
//	h[8]--
//	c := csum.Update16(binary.BigEndian.Uint16(h[10:]), old, binary.BigEndian.Uint16(h[8:]))
//	binary.BigEndian.PutUint16(h[10:], c)
func Update16(sum, old, new uint16) uint16 {
	s := uint32(^sum) + uint32(^old) + uint32(new) // <= 3*0xFFFF
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}

// Update32 is Update16 for a 32-bit field at an even offset (an IPv4
// address, a TCP sequence number, two ports at once), old and new read
// big-endian.
func Update32(sum uint16, old, new uint32) uint16 {
	s := uint64(^sum) + uint64(^old>>16) + uint64(^old&0xffff) + uint64(new>>16) + uint64(new&0xffff)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}

// Update is Update16 for a field of any length starting at an even offset,
// such as an IPv6 address: old and new must have the same length (it
// panics if not). It does not allocate.
func Update(sum uint16, old, new []byte) uint16 {
	if len(old) != len(new) {
		panic("csum: Update: old and new differ in length")
	}
	s := uint32(^sum) + uint32(^Fold(Sum(old, 0))) + uint32(Fold(Sum(new, 0)))
	return ^Fold(s)
}

// impl names one set of kernels, for the tests: use switches the package
// to it and returns a function that switches back.
type impl struct {
	name string
	use  func() (restore func())
}
