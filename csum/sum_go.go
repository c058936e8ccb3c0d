package csum

import (
	"encoding/binary"
	"math/bits"
)

// The kernels add up the data as little-endian words into a 64-bit
// accumulator acc whose value is congruent, modulo 0xFFFF, to the sum of
// the data's little-endian 16-bit words plus the acc passed in, and is
// zero only if both were. (2^16 = 1 modulo 0xFFFF, so a 32- or 64-bit
// little-endian load is worth the sum of its 16-bit words.)

// The pure-Go kernels run two independent chains over each 64-byte block:
// half of the words go through a math/bits.Add64 carry chain (ADC on
// amd64, latency-bound at one word per cycle), the other half through the
// carry-free scheme of the assembly kernels (see sum_amd64.s): each word
// added whole to a wrapping a and its high half to h, so that the low
// halves sum to exactly a - h<<32 (callers pass at most maxChunk bytes,
// which keeps h below 2^58). Two chains are quicker than either alone
// (go test -tags purego -bench Sum ./csum).

// sumGo is the pure-Go kernel, used on every architecture for short
// slices and as the whole implementation without assembly.
func sumGo(b []byte, acc uint64) uint64 {
	var c, a, h uint64
	for len(b) >= 64 {
		w := b[:64] // one bounds check for the block
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(w[0:]), c)
		x1 := binary.LittleEndian.Uint64(w[8:])
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(w[16:]), c)
		x3 := binary.LittleEndian.Uint64(w[24:])
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(w[32:]), c)
		x5 := binary.LittleEndian.Uint64(w[40:])
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(w[48:]), c)
		x7 := binary.LittleEndian.Uint64(w[56:])
		a += x1 + x3 + x5 + x7
		h += x1>>32 + x3>>32 + x5>>32 + x7>>32
		b = b[64:]
	}
	acc, c = bits.Add64(acc, a-h<<32, c)
	acc, c = bits.Add64(acc, h, c)
	return tailGo(b, acc, c)
}

// smallMax is the length below which Sum and CopyAndSum use sumSmall.
const smallMax = 32

// useSmall is switched off by the tests that drive the kernels with every
// length.
var useSmall = true

// sumSmall adds the little-endian word sum of b, len(b) < smallMax, to
// s < 2^32, without carries: each 8-byte load adds its two 32-bit halves,
// so the result stays below 2^36. It is straight-line code, without a loop
// (a Go loop over words costs several times an ADC chain). An odd last
// byte goes first (it is the low byte of its word); then whole words from
// the start, and the last 2, 4 or 6 bytes from the word that ends at the
// end, shifted right by an even number of bytes, which keeps every byte at
// its place in its 16-bit word.
func sumSmall(b []byte, s uint64) uint64 {
	if n := len(b); n&1 != 0 {
		s += uint64(b[n-1])
		b = b[:n-1]
	}
	if len(b) < 8 {
		if len(b) >= 4 {
			s += uint64(binary.LittleEndian.Uint32(b[:4]))
			if len(b) == 6 {
				s += uint64(binary.LittleEndian.Uint16(b[4:6]))
			}
		} else if len(b) == 2 {
			s += uint64(binary.LittleEndian.Uint16(b[:2]))
		}
		return s
	}
	x := binary.LittleEndian.Uint64(b[:8])
	s += x&0xffffffff + x>>32
	if len(b) >= 16 {
		x = binary.LittleEndian.Uint64(b[8:16])
		s += x&0xffffffff + x>>32
		if len(b) >= 24 {
			x = binary.LittleEndian.Uint64(b[16:24])
			s += x&0xffffffff + x>>32
		}
	}
	if r := len(b) & 7; r != 0 {
		x = binary.LittleEndian.Uint64(b[len(b)-8:]) >> (64 - 8*r)
		s += x&0xffffffff + x>>32
	}
	return s
}

// tailGo adds the last len(b) < 32 bytes and the pending carry c to acc.
func tailGo(b []byte, acc, c uint64) uint64 {
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		acc, c = bits.Add64(acc, uint64(b[0]), c)
	}
	acc, c = bits.Add64(acc, 0, c)
	return acc + c
}

// copySumGo copies src into dst (len(dst) == len(src)) and sums src as
// sumGo does, loading each word once.
func copySumGo(dst, src []byte, acc uint64) uint64 {
	var c, a, h uint64
	for len(src) >= 64 && len(dst) >= 64 {
		s, d := src[:64], dst[:64]
		for i := 0; i < 64; i += 16 {
			x0 := binary.LittleEndian.Uint64(s[i:])
			x1 := binary.LittleEndian.Uint64(s[i+8:])
			binary.LittleEndian.PutUint64(d[i:], x0)
			binary.LittleEndian.PutUint64(d[i+8:], x1)
			acc, c = bits.Add64(acc, x0, c)
			a += x1
			h += x1 >> 32
		}
		src, dst = src[64:], dst[64:]
	}
	acc, c = bits.Add64(acc, a-h<<32, c)
	acc, c = bits.Add64(acc, h, c)
	copy(dst, src)
	return tailGo(src, acc, c)
}
