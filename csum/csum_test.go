package csum

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// refSum is the byte-pair reference: the ones'-complement sum of b as
// big-endian 16-bit words, an odd last byte padded with zero, added to the
// folded initial value, with an end-around carry after every word.
func refSum(b []byte, initial uint16) uint16 {
	s := uint32(initial)
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
		s = s&0xffff + s>>16
	}
	if len(b)&1 != 0 {
		s += uint32(b[len(b)-1]) << 8
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// forEachImpl runs f once per kernel set this machine supports.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			restore := im.use()
			defer restore()
			f(t)
		})
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestImpls(t *testing.T) {
	// TestGuardPage takes the pure-Go kernels as its reference, and
	// TestImplsPresent (linux/amd64) checks that every kernel the CPU can
	// run is here.
	var names []string
	for _, im := range impls {
		names = append(names, im.name)
	}
	if len(names) == 0 || names[0] != "go" {
		t.Fatalf("kernel sets %v: the first must be go", names)
	}
	t.Logf("kernels tested: %v", names)
}

// TestSumDifferential compares Sum and CopyAndSum with the reference for
// every length 0..2048 at every offset 0..7, with random initial values.
func TestSumDifferential(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		const maxLen = 2048
		buf := randBytes(r, maxLen+8+64)
		dst := make([]byte, maxLen+8+64)
		for n := 0; n <= maxLen; n++ {
			for off := 0; off < 8; off++ {
				b := buf[off : off+n]
				init := uint16(r.Uint32())
				want := refSum(b, init)
				if got := Fold(Sum(b, uint32(init))); got != want {
					t.Fatalf("Sum(len %d, off %d, init %#04x) = %#04x, want %#04x", n, off, init, got, want)
				}
				// CopyAndSum into a destination at another offset, with
				// guard bytes around it that must stay untouched.
				doff := (off * 3) & 7
				for i := range dst {
					dst[i] = 0xA5
				}
				d := dst[doff : doff+n+3]
				if got := Fold(CopyAndSum(d, b, uint32(init))); got != want {
					t.Fatalf("CopyAndSum(len %d, off %d) = %#04x, want %#04x", n, off, got, want)
				}
				if !bytes.Equal(d[:n], b) {
					t.Fatalf("CopyAndSum(len %d, off %d): copy differs", n, off)
				}
				for i, c := range dst {
					if (i < doff || i >= doff+n) && c != 0xA5 {
						t.Fatalf("CopyAndSum(len %d, off %d, dst off %d) wrote byte %d outside dst[:len(src)]", n, off, doff, i)
					}
				}
			}
		}
	})
}

// TestSumExact compares the partial sums of every kernel set with the
// pure-Go kernels' as uint32 values, not only folded, at every length
// 0..600 and offset 0..7: the kernels agree modulo 2^32-1, which keeps a
// chain of partial sums the same on every machine. It guards the places
// that sum's short path and its AVX2 tail window (tailShuf) give to the
// last bytes, and the odd last byte's, which TestSumDifferential (mod
// 0xFFFF) does not see.
func TestSumExact(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const maxLen = 600
	buf := randBytes(r, maxLen+8)
	want := make([][8]uint32, maxLen+1)
	restore := impls[0].use()
	for n := 0; n <= maxLen; n++ {
		for off := range 8 {
			want[n][off] = Sum(buf[off:off+n], uint32(n)*0x9e3779b1)
		}
	}
	restore()
	forEachImpl(t, func(t *testing.T) {
		for n := 0; n <= maxLen; n++ {
			for off := range 8 {
				if got := Sum(buf[off:off+n], uint32(n)*0x9e3779b1); got != want[n][off] {
					t.Fatalf("Sum(len %d, off %d) = %#x, want %#x (the %s kernels)", n, off, got, want[n][off], impls[0].name)
				}
			}
		}
	})
}

// TestSumLarge covers lengths up to 64 KiB and beyond, where the vector
// loops run long, and the patterns that stress carries.
func TestSumLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	sizes := []int{4095, 4096, 9000, 16383, 32768, 65535, 65536, 65537, 1 << 20}
	for i := 0; i < 40; i++ {
		sizes = append(sizes, 2048+r.IntN(65536-2048))
	}
	patterns := map[string]func(n int) []byte{
		"random": func(n int) []byte { return randBytes(r, n) },
		"zero":   func(n int) []byte { return make([]byte, n) },
		"ff":     func(n int) []byte { return bytes.Repeat([]byte{0xff}, n) },
		"fe01": func(n int) []byte {
			return bytes.Repeat([]byte{0xfe, 0x01}, n/2+1)[:n]
		},
		"high": func(n int) []byte { // every lane's high half large
			b := randBytes(r, n)
			for i := range b {
				if i&4 != 0 {
					b[i] = 0xff
				}
			}
			return b
		},
	}
	forEachImpl(t, func(t *testing.T) {
		for name, gen := range patterns {
			for _, n := range sizes {
				for _, off := range []int{0, 1, 3, 7} {
					buf := gen(n + off)
					b := buf[off:]
					for _, init := range []uint16{0, 0xffff, 0x1234} {
						want := refSum(b, init)
						if got := Fold(Sum(b, uint32(init))); got != want {
							t.Fatalf("%s: Sum(len %d, off %d, init %#x) = %#04x, want %#04x", name, n, off, init, got, want)
						}
						dst := make([]byte, n)
						if got := Fold(CopyAndSum(dst, b, uint32(init))); got != want || !bytes.Equal(dst, b) {
							t.Fatalf("%s: CopyAndSum(len %d, off %d, init %#x) = %#04x, want %#04x (copy equal: %v)",
								name, n, off, init, got, want, bytes.Equal(dst, b))
						}
					}
				}
			}
		}
	})
}

// TestZeroVersusMinusZero: the ones'-complement sum is +0 only for all-zero
// data; data that sums to 0xFFFF must not come out as 0 and vice versa.
func TestZeroVersusMinusZero(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, n := range []int{0, 1, 2, 7, 64, 100, 1500, 4096, 65536} {
			if got := Fold(Sum(make([]byte, n), 0)); got != 0 {
				t.Errorf("Fold(Sum(zeros[%d])) = %#x, want 0", n, got)
			}
			if got := Checksum(make([]byte, n), 0); got != 0xffff {
				t.Errorf("Checksum(zeros[%d]) = %#x, want 0xffff", n, got)
			}
			if n < 2 {
				continue
			}
			ff := bytes.Repeat([]byte{0xff}, n&^1)
			if got := Fold(Sum(ff, 0)); got != 0xffff {
				t.Errorf("Fold(Sum(ff[%d])) = %#x, want 0xffff", len(ff), got)
			}
			// 0x8000 + 0x7fff = 0xffff: -0 from non-zero words.
			b := make([]byte, n&^1)
			b[0], b[1] = 0x80, 0x00
			b[len(b)-2], b[len(b)-1] = 0x7f, 0xff
			if len(b) == 2 {
				b[0], b[1] = 0xff, 0xff
			}
			if got := Fold(Sum(b, 0)); got != 0xffff {
				t.Errorf("Fold(Sum(%d bytes summing to -0)) = %#x, want 0xffff", len(b), got)
			}
		}
	})
}

// TestChained sums random packets in random pieces, odd lengths included,
// chaining with Sum's initial value where a piece starts at an even
// offset and with Combine everywhere.
func TestChained(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for iter := 0; iter < 3000; iter++ {
			p := randBytes(r, r.IntN(3000))
			want := refSum(p, 0)
			var combined, chained uint32
			canChain := true
			for off := 0; off < len(p); {
				n := 1 + r.IntN(len(p)-off)
				if r.IntN(3) == 0 {
					n = 1 + r.IntN(min(9, len(p)-off))
				}
				piece := p[off : off+n]
				combined = Combine(combined, Sum(piece, 0), off)
				if off&1 == 0 && canChain {
					chained = Sum(piece, chained)
				} else {
					canChain = false
				}
				// CopyAndSum pieces combine the same way.
				off += n
			}
			if got := Fold(combined); got != want {
				t.Fatalf("Combine over pieces of %d bytes = %#04x, want %#04x", len(p), got, want)
			}
			if canChain {
				if got := Fold(chained); got != want {
					t.Fatalf("chained Sum over %d bytes = %#04x, want %#04x", len(p), got, want)
				}
			}
		}
	})
}

func TestCopyAndSumCombine(t *testing.T) {
	// A frame built from an odd-length header piece and a payload copied
	// with CopyAndSum at an odd offset.
	r := rand.New(rand.NewPCG(7, 8))
	forEachImpl(t, func(t *testing.T) {
		for iter := 0; iter < 500; iter++ {
			hl := r.IntN(64)
			pl := r.IntN(4000)
			frame := make([]byte, hl+pl)
			copy(frame, randBytes(r, hl))
			payload := randBytes(r, pl)
			s := Sum(frame[:hl], 0)
			s = Combine(s, CopyAndSum(frame[hl:], payload, 0), hl)
			if got, want := Fold(s), refSum(frame, 0); got != want {
				t.Fatalf("header %d + payload %d: %#04x, want %#04x", hl, pl, got, want)
			}
		}
	})
}

func TestCopyAndSumRules(t *testing.T) {
	src := []byte{1, 2, 3, 4, 5}
	dst := make([]byte, 8)
	for i := range dst {
		dst[i] = 9
	}
	if got, want := Fold(CopyAndSum(dst, src, 0)), refSum(src, 0); got != want {
		t.Fatalf("CopyAndSum = %#x, want %#x", got, want)
	}
	if !bytes.Equal(dst, []byte{1, 2, 3, 4, 5, 9, 9, 9}) {
		t.Fatalf("dst = %v", dst)
	}
	// Exact overlap is allowed.
	b := []byte("exact overlap is fine, and long enough to reach the vector loops of every kernel. 0123456789abcdef0123456789")
	want := refSum(b, 0)
	forEachImpl(t, func(t *testing.T) {
		c := bytes.Clone(b)
		if got := Fold(CopyAndSum(c, c, 0)); got != want || !bytes.Equal(c, b) {
			t.Fatalf("in place: %#x, want %#x", got, want)
		}
	})
	defer func() {
		if recover() == nil {
			t.Fatal("CopyAndSum with short dst did not panic")
		}
	}()
	CopyAndSum(make([]byte, 4), src, 0)
}

func TestFoldFinish(t *testing.T) {
	for _, tc := range []struct {
		sum     uint32
		fold    uint16
		finish  uint16
		udp     uint16
		comment string
	}{
		{0, 0, 0xffff, 0xffff, "nothing summed"},
		{0xffff, 0xffff, 0, 0xffff, "minus zero: UDP sends 0xffff"},
		{0x1_0000, 1, 0xfffe, 0xfffe, "carry"},
		{0xffff_ffff, 0xffff, 0, 0xffff, "all ones"},
		{0x1234_5678, 0x68ac, ^uint16(0x68ac), ^uint16(0x68ac), ""},
		{0xfffe_0002, 0x0001, 0xfffe, 0xfffe, "double carry"},
	} {
		if got := Fold(tc.sum); got != tc.fold {
			t.Errorf("Fold(%#x) = %#x, want %#x %s", tc.sum, got, tc.fold, tc.comment)
		}
		if got := Finish(tc.sum); got != tc.finish {
			t.Errorf("Finish(%#x) = %#x, want %#x", tc.sum, got, tc.finish)
		}
		if got := FinishUDP(tc.sum); got != tc.udp {
			t.Errorf("FinishUDP(%#x) = %#x, want %#x", tc.sum, got, tc.udp)
		}
	}
}

// TestRFC1071Example checks the worked example of RFC 1071 section 3:
// bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
func TestRFC1071Example(t *testing.T) {
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	forEachImpl(t, func(t *testing.T) {
		if got := Fold(Sum(b, 0)); got != 0xddf2 {
			t.Fatalf("Sum = %#x, want 0xddf2", got)
		}
		// The sum is independent of the word boundaries' alignment in
		// memory, and a byte-swapped start (Combine at an odd offset)
		// gives the swapped sum.
		if got := Fold(Combine(0, Sum(b, 0), 1)); got != 0xf2dd {
			t.Fatalf("Combine at odd offset = %#x, want 0xf2dd", got)
		}
	})
}

func TestUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for iter := 0; iter < 20000; iter++ {
		n := 2 + 2*r.IntN(40)
		b := randBytes(r, n)
		b[0] |= 0x40 // never all zero, as in a real header
		field := 2 * r.IntN(n/2)
		c := Checksum(b, 0)
		// 16-bit field.
		old := binary.BigEndian.Uint16(b[field:])
		nw := uint16(r.Uint32())
		if iter%7 == 0 {
			nw = old ^ 0xffff
		}
		binary.BigEndian.PutUint16(b[field:], nw)
		if got, want := Update16(c, old, nw), Checksum(b, 0); got != want {
			t.Fatalf("Update16(%#x, %#x, %#x) = %#x, recomputed %#x", c, old, nw, got, want)
		}
		c = Checksum(b, 0)
		// 32-bit field.
		if field+4 <= n {
			old := binary.BigEndian.Uint32(b[field:])
			nw := r.Uint32()
			binary.BigEndian.PutUint32(b[field:], nw)
			if got, want := Update32(c, old, nw), Checksum(b, 0); got != want {
				t.Fatalf("Update32(%#x, %#x, %#x) = %#x, recomputed %#x", c, old, nw, got, want)
			}
			c = Checksum(b, 0)
		}
		// A longer field.
		if field+16 <= n {
			old := bytes.Clone(b[field : field+16])
			copy(b[field:], randBytes(r, 16))
			if got, want := Update(c, old, b[field:field+16]), Checksum(b, 0); got != want {
				t.Fatalf("Update(16 bytes) = %#x, recomputed %#x", got, want)
			}
		}
	}
}

// TestUpdateMinusZero is RFC 1624's section 4 example: HC = 0xDD2F and a
// field changing from m = 0x5555 to m' = 0x3285. Recomputing gives 0x0000
// (the new data sum is 0xFFFF); RFC 1141's HC' = HC + m + ~m' gives
// 0xFFFF, a -0 that a full computation never produces for non-zero data.
func TestUpdateMinusZero(t *testing.T) {
	if got := Update16(0xdd2f, 0x5555, 0x3285); got != 0x0000 {
		t.Fatalf("Update16(0xdd2f, 0x5555, 0x3285) = %#x, want 0x0000 (RFC 1624 section 4)", got)
	}
	rfc1141 := func(hc, m, m2 uint16) uint16 {
		s := uint32(hc) + uint32(m) + uint32(^m2)
		s = s&0xffff + s>>16
		s = s&0xffff + s>>16
		return uint16(s)
	}
	if got := rfc1141(0xdd2f, 0x5555, 0x3285); got != 0xffff {
		t.Fatalf("the RFC 1141 formula gave %#x; the example wants it to give 0xffff", got)
	}
	// The same through real data: words that sum to 0xFFFF after the change.
	b := make([]byte, 4)
	rest := uint16(0xffff - 0x3285) // the other words sum to 0xCD7A
	binary.BigEndian.PutUint16(b[0:], rest)
	binary.BigEndian.PutUint16(b[2:], 0x5555)
	c := Checksum(b, 0)
	binary.BigEndian.PutUint16(b[2:], 0x3285)
	if got, want := Update16(c, 0x5555, 0x3285), Checksum(b, 0); got != want || want != 0 {
		t.Fatalf("Update16 = %#x, recomputed %#x (want 0)", got, want)
	}
}

func ExampleUpdate16() {
	// Decrement the TTL of an IPv4 header and patch its checksum.
	h := []byte{0x45, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00,
		198, 18, 0, 1, 198, 18, 0, 2}
	binary.BigEndian.PutUint16(h[10:], IPv4Header(h))
	old := binary.BigEndian.Uint16(h[8:]) // TTL and protocol
	h[8]--
	c := Update16(binary.BigEndian.Uint16(h[10:]), old, binary.BigEndian.Uint16(h[8:]))
	binary.BigEndian.PutUint16(h[10:], c)
	fmt.Printf("ttl %d, checksum %#04x, verifies: %v\n", h[8], c, Checksum(h, 0) == 0)
	// Output: ttl 63, checksum 0x9d4d, verifies: true
}

// TestChunks drives the chunking of slices longer than maxChunk (1 GiB) by
// making the chunk small.
func TestChunks(t *testing.T) {
	defer setMaxChunk(maxChunk)
	r := rand.New(rand.NewPCG(15, 16))
	forEachImpl(t, func(t *testing.T) {
		for _, chunk := range []int{64, 98, 256, 4096} {
			setMaxChunk(chunk)
			for _, n := range []int{chunk - 1, chunk, chunk + 1, 3*chunk + 33, 10000} {
				b := randBytes(r, n)
				init := uint16(r.Uint32())
				want := refSum(b, init)
				if got := Fold(Sum(b, uint32(init))); got != want {
					t.Fatalf("chunk %d, len %d: Sum %#x, want %#x", chunk, n, got, want)
				}
				dst := make([]byte, n)
				if got := Fold(CopyAndSum(dst, b, uint32(init))); got != want || !bytes.Equal(dst, b) {
					t.Fatalf("chunk %d, len %d: CopyAndSum %#x, want %#x", chunk, n, got, want)
				}
			}
		}
	})
}
