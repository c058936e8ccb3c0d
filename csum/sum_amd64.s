//go:build amd64 && gc && !purego

#include "textflag.h"

// The vector kernels add 64-bit little-endian lanes without carries: a
// lane x is added whole to a wrapping accumulator A and its high half
// x>>32 to H; at the end sum(lo) = A - H<<32 exactly, and sum(lo) +
// sum(hi) is the lanes' worth modulo 0xFFFF (see sum_go.go). The Go side
// passes at most 1 GiB per call, so no lane sum reaches 2^64 and the lanes
// can be added together without carries. The scalar kernels and the
// scalar tails use an ADD/ADC chain on general registers.
//
// No kernel reads or writes a byte outside its slices, not even under an
// all-zero mask: a masked load whose masked-off bytes fall on a page that
// is not present takes a slow microcode assist (TestGuardPage checks the
// bounds; BenchmarkSum/4096/page-end against /4096/mid-page shows the
// time). Tails are summed by exact loads, by an 8-byte load that ends at
// the last byte and starts inside the slice, or (the AVX2 and AVX-512
// kernels) by the 32-byte window that ends at the last byte, shuffled by
// tailShuf.

// SUMTAIL (sumAVX512 below 32 bytes, which only the tests send it) adds
// the last CX < 64 bytes at SI to AX (no carry pending) and leaves the
// sum, with its carries folded in, in AX.
// The slice is at least 8 bytes long. Clobbers CX, SI, R9.
//
// An odd last byte goes first: it is the low byte of a little-endian word.
// The rest is an even count: 32, 16 and 8 bytes by exact loads, then the
// last 0, 2, 4 or 6 bytes from the 8-byte word that ends at the end of the
// slice, shifted right to drop the bytes already summed. An even shift
// keeps every byte at its word position, low or high.
#define SUMTAIL \
	TESTQ   CX, CX \
	JZ      tailDone \
	TESTQ   $1, CX \
	JZ      tailEven \
	MOVBQZX -1(SI)(CX*1), R9 \
	ADDQ    R9, AX \
	ADCQ    $0, AX \
	DECQ    CX \
tailEven: \
	TESTQ   $32, CX \
	JZ      tail16 \
	ADDQ    0(SI), AX \
	ADCQ    8(SI), AX \
	ADCQ    16(SI), AX \
	ADCQ    24(SI), AX \
	ADCQ    $0, AX \
	ADDQ    $32, SI \
tail16: \
	TESTQ   $16, CX \
	JZ      tail8 \
	ADDQ    0(SI), AX \
	ADCQ    8(SI), AX \
	ADCQ    $0, AX \
	ADDQ    $16, SI \
tail8: \
	TESTQ   $8, CX \
	JZ      tail0 \
	ADDQ    0(SI), AX \
	ADCQ    $0, AX \
	ADDQ    $8, SI \
tail0: \
	ANDQ    $6, CX \
	JZ      tailDone \
	MOVQ    -8(SI)(CX*1), R9 \
	NEGQ    CX \
	LEAQ    64(CX*8), CX \
	SHRQ    CX, R9 \
	ADDQ    R9, AX \
	ADCQ    $0, AX \
tailDone:

// SUMTINY adds a whole slice of CX < 8 bytes at SI to AX (no carry
// pending), by exact loads. Clobbers SI, R9.
#define SUMTINY \
	TESTQ   $4, CX \
	JZ      tiny2 \
	MOVLQZX (SI), R9 \
	ADDQ    R9, AX \
	ADCQ    $0, AX \
	ADDQ    $4, SI \
tiny2: \
	TESTQ   $2, CX \
	JZ      tiny1 \
	MOVWQZX (SI), R9 \
	ADDQ    R9, AX \
	ADCQ    $0, AX \
	ADDQ    $2, SI \
tiny1: \
	TESTQ   $1, CX \
	JZ      tinyDone \
	MOVBQZX (SI), R9 \
	ADDQ    R9, AX \
	ADCQ    $0, AX \
tinyDone:

// FINISH(initial) folds the sum of the data in AX (little-endian words,
// summed from 0) to 32 bits with an end-around carry, rotates it by 8 to
// big-endian words, and adds the initial value with an end-around carry,
// into AX: Add(toBE(AX), initial) in csum.go. The initial value comes
// last, so that a chain of dependent sums waits for two instructions per
// call. Clobbers DX.
#define FINISH(initial) \
	MOVQ AX, DX \
	SHRQ $32, DX \
	ADDL DX, AX \
	ADCL $0, AX \
	ROLL $8, AX \
	ADDL initial, AX \
	ADCL $0, AX

// FOLD folds the sum of the data in AX (little-endian words, summed
// from 0) to 32 bits with an end-around carry and rotates it by 8 to
// big-endian words, into AX: toBE(AX) in csum.go. Sum adds the initial
// value in Go, so that a chain of dependent sums stays in registers
// (see sum). Clobbers DX.
#define FOLD \
	MOVQ AX, DX \
	SHRQ $32, DX \
	ADDL DX, AX \
	ADCL $0, AX \
	ROLL $8, AX

// COPYTAIL copies the last CX < 64 bytes from SI to DI and adds them to AX
// (no carry pending), by exact loads and stores: 32, 16, 8, 4, 2 and 1
// bytes as the bits of CX say. SI is at an even offset of the slice, so the odd
// last byte is the low byte of its little-endian word. Clobbers SI, DI,
// DX, R9.
#define COPYTAIL \
	TESTQ   CX, CX \
	JZ      copyDone \
	TESTQ   $32, CX \
	JZ      copy16 \
	MOVQ    0(SI), DX \
	MOVQ    8(SI), R9 \
	MOVQ    DX, 0(DI) \
	MOVQ    R9, 8(DI) \
	ADDQ    DX, AX \
	ADCQ    R9, AX \
	MOVQ    16(SI), DX \
	MOVQ    24(SI), R9 \
	MOVQ    DX, 16(DI) \
	MOVQ    R9, 24(DI) \
	ADCQ    DX, AX \
	ADCQ    R9, AX \
	ADCQ    $0, AX \
	ADDQ    $32, SI \
	ADDQ    $32, DI \
copy16: \
	TESTQ   $16, CX \
	JZ      copy8 \
	MOVQ    0(SI), DX \
	MOVQ    8(SI), R9 \
	MOVQ    DX, 0(DI) \
	MOVQ    R9, 8(DI) \
	ADDQ    DX, AX \
	ADCQ    R9, AX \
	ADCQ    $0, AX \
	ADDQ    $16, SI \
	ADDQ    $16, DI \
copy8: \
	TESTQ   $8, CX \
	JZ      copy4 \
	MOVQ    (SI), DX \
	MOVQ    DX, (DI) \
	ADDQ    DX, AX \
	ADCQ    $0, AX \
	ADDQ    $8, SI \
	ADDQ    $8, DI \
copy4: \
	TESTQ   $4, CX \
	JZ      copy2 \
	MOVL    (SI), DX \
	MOVL    DX, (DI) \
	ADDQ    DX, AX \
	ADCQ    $0, AX \
	ADDQ    $4, SI \
	ADDQ    $4, DI \
copy2: \
	TESTQ   $2, CX \
	JZ      copy1 \
	MOVWQZX (SI), DX \
	MOVW    DX, (DI) \
	ADDQ    DX, AX \
	ADCQ    $0, AX \
	ADDQ    $2, SI \
	ADDQ    $2, DI \
copy1: \
	TESTQ   $1, CX \
	JZ      copyDone \
	MOVBQZX (SI), DX \
	MOVB    DX, (DI) \
	ADDQ    DX, AX \
	ADCQ    $0, AX \
copyDone:

// REDUCE256 turns the accumulators A (ya) and H (yh) into one 64-bit
// integer in r: lanes of A - H<<32 + H, added across. Clobbers y1, y2.
#define REDUCE256(ya, yh, xa, x1, y1, r) \
	VPSLLQ       $32, yh, y1  \
	VPADDQ       yh, ya, ya   \
	VPSUBQ       y1, ya, ya   \
	VEXTRACTI128 $1, ya, x1   \
	VPADDQ       x1, xa, xa   \
	VPSHUFD      $0x4e, xa, x1 \
	VPADDQ       x1, xa, xa   \
	VMOVQ        xa, r

// SUMWINDOW adds the last DX = n%32 > 0 bytes of the CX = n >= 32 bytes
// at SI to sumAVX512's A3 and H3 (Z3, Z7), from the 32-byte window that
// ends at the end of the slice shuffled by tailShuf[DX], and the odd last
// byte, which the control leaves out, to AX (zero before). What follows
// reads only bits 5 and up of CX, so CX keeps its low bits. The VEX
// instructions clear the upper halves of Z8 and Z9. Clobbers DX, R9, Z8,
// Z9.
#define SUMWINDOW \
	SHLQ    $5, DX \
	LEAQ    ·tailShuf(SB), R9 \
	VMOVDQU -32(SI)(CX*1), Y8 \
	VPSHUFB (R9)(DX*1), Y8, Y8 \
	VPSRLQ  $32, Y8, Y9 \
	VPADDQ  Z8, Z3, Z3 \
	VPADDQ  Z9, Z7, Z7 \
	MOVBQZX -1(SI)(CX*1), R9 \
	TESTQ   $1, CX \
	CMOVQNE R9, AX

// SUMAVX512 is sumAVX512 for CX = n >= 32 bytes at SI, with AX zero: it
// returns toBE of their sum (ret+16(FP)). From 256 bytes the first 256
// are the first values of four pairs of 512-bit accumulators (A in
// Z0-Z3, H in Z4-Z7), with no zeroing and no adds; below, they start at
// zero. The last n%32 bytes come next (SUMWINDOW: out of line from 256
// bytes), as in sum's AVX2 kernel. Then 256 bytes per iteration, to an end pointer
// (DX), then what bits 7, 6 and 5 of n say (two vectors into the first
// two pairs, one into the third, one 256-bit vector), without a loop.
//
// The loop loads three of its four vectors into registers and adds the
// fourth from memory operands (a load and an add, and a load and a
// shift: the vector is loaded twice, as C compilers do for all four).
// That is the quickest mix of the three on the AVX-512 machine measured
// (one instruction less than four register loads, three loads less than
// four memory operands; BenchmarkSum). The fold takes
// the last 256-bit vector into a register: VPSRLQ from memory into a Y
// register would need AVX-512 VL.
#define SUMAVX512 \
	CMPQ      CX, $256 \
	JB        zshort \
	VMOVDQU64 0(SI), Z0 \
	VMOVDQU64 64(SI), Z1 \
	VMOVDQU64 128(SI), Z2 \
	VMOVDQU64 192(SI), Z3 \
	VPSRLQ    $32, Z0, Z4 \
	VPSRLQ    $32, Z1, Z5 \
	VPSRLQ    $32, Z2, Z6 \
	VPSRLQ    $32, Z3, Z7 \
	MOVQ      CX, DX \
	ANDQ      $31, DX \
	JNZ       zwindow \
zwhole: \
	ADDQ $256, SI \
	SUBQ $256, CX \
	MOVQ CX, DX \
	ANDQ $-256, DX \
	JZ   zrest \
	ADDQ SI, DX \
	JMP  zloop256 \
	PCALIGN $64 \
zloop256: \
	VMOVDQU64 0(SI), Z8 \
	VMOVDQU64 64(SI), Z9 \
	VMOVDQU64 128(SI), Z10 \
	VPADDQ    192(SI), Z3, Z3 \
	VPSRLQ    $32, 192(SI), Z11 \
	VPADDQ    Z8, Z0, Z0 \
	VPADDQ    Z9, Z1, Z1 \
	VPADDQ    Z10, Z2, Z2 \
	VPSRLQ    $32, Z8, Z8 \
	VPSRLQ    $32, Z9, Z9 \
	VPSRLQ    $32, Z10, Z10 \
	VPADDQ    Z8, Z4, Z4 \
	VPADDQ    Z9, Z5, Z5 \
	VPADDQ    Z10, Z6, Z6 \
	VPADDQ    Z11, Z7, Z7 \
	ADDQ      $256, SI \
	CMPQ      SI, DX \
	JNE       zloop256 \
zrest: \
	TESTQ     $128, CX \
	JZ        zrest64 \
	VMOVDQU64 0(SI), Z8 \
	VMOVDQU64 64(SI), Z9 \
	VPADDQ    Z8, Z0, Z0 \
	VPADDQ    Z9, Z1, Z1 \
	VPSRLQ    $32, Z8, Z8 \
	VPSRLQ    $32, Z9, Z9 \
	VPADDQ    Z8, Z4, Z4 \
	VPADDQ    Z9, Z5, Z5 \
	SUBQ      $-128, SI \
zrest64: \
	TESTQ     $64, CX \
	JZ        zfold \
	VMOVDQU64 (SI), Z8 \
	VPADDQ    Z8, Z2, Z2 \
	VPSRLQ    $32, Z8, Z8 \
	VPADDQ    Z8, Z6, Z6 \
	ADDQ      $64, SI \
zfold: \
	VPADDQ Z1, Z0, Z0 \
	VPADDQ Z3, Z2, Z2 \
	VPADDQ Z2, Z0, Z0 \
	VPADDQ Z5, Z4, Z4 \
	VPADDQ Z7, Z6, Z6 \
	VPADDQ Z6, Z4, Z4 \
	REDUCE512(Z0, Z4, Y0, Y4, Y1) \
	TESTQ   $32, CX \
	JZ      zreduce \
	VMOVDQU (SI), Y8 \
	VPADDQ  Y8, Y0, Y0 \
	VPSRLQ  $32, Y8, Y8 \
	VPADDQ  Y8, Y4, Y4 \
zreduce: \
	REDUCE256(Y0, Y4, X0, X1, Y1, DX) \
	VZEROUPPER \
	ADDQ   DX, AX \
	ADCQ   $0, AX \
	FOLD \
	MOVL   AX, ret+16(FP) \
	RET \
zwindow: \
	SUMWINDOW \
	JMP zwhole \
zshort: \
	VPXORQ Z0, Z0, Z0 \
	VPXORQ Z1, Z1, Z1 \
	VPXORQ Z2, Z2, Z2 \
	VPXORQ Z3, Z3, Z3 \
	VPXORQ Z4, Z4, Z4 \
	VPXORQ Z5, Z5, Z5 \
	VPXORQ Z6, Z6, Z6 \
	VPXORQ Z7, Z7, Z7 \
	MOVQ   CX, DX \
	ANDQ   $31, DX \
	JZ     zrest \
	SUMWINDOW \
	JMP    zrest

// REDUCE512 folds the 512-bit accumulators za (A) and zh (H) to 256 bits
// in ya and yh. Clobbers y1.
#define REDUCE512(za, zh, ya, yh, y1) \
	VEXTRACTI64X4 $1, za, y1 \
	VPADDQ        y1, ya, ya \
	VEXTRACTI64X4 $1, zh, y1 \
	VPADDQ        y1, yh, yh

// ACC2(ya, yb) adds the vectors in ya and yb to A (Y0, Y1) and their
// high halves to H (Y4, Y5). Clobbers ya, yb.
#define ACC2(ya, yb) \
	VPADDQ ya, Y0, Y0 \
	VPADDQ yb, Y1, Y1 \
	VPSRLQ $32, ya, ya \
	VPSRLQ $32, yb, yb \
	VPADDQ ya, Y4, Y4 \
	VPADDQ yb, Y5, Y5

// COPYSUMAVX2 sums the CX >= 32 bytes at SI with 256-bit vectors and
// stores what it loads to DI: 128 bytes per iteration into two pairs of
// accumulators (A in Y0-Y1, H in Y4-Y5), then up to three more vectors
// without a loop, and leaves the last CX < 32 bytes for COPYTAIL, with
// the vectors' sum in AX. The loop runs to an end pointer (DX), so that
// it carries two scalar instructions. Clobbers DX, Y0-Y11.
#define COPYSUMAVX2 \
	VPXOR   Y0, Y0, Y0 \
	VPXOR   Y1, Y1, Y1 \
	VPXOR   Y4, Y4, Y4 \
	VPXOR   Y5, Y5, Y5 \
	MOVQ    CX, DX \
	ANDQ    $-128, DX \
	JZ      c2rest \
	ADDQ    SI, DX \
	ANDQ    $127, CX \
	JMP     c2loop \
	PCALIGN $64 \
c2loop: \
	VMOVDQU 0(SI), Y8 \
	VMOVDQU 32(SI), Y9 \
	VMOVDQU 64(SI), Y10 \
	VMOVDQU 96(SI), Y11 \
	VMOVDQU Y8, 0(DI) \
	VMOVDQU Y9, 32(DI) \
	VMOVDQU Y10, 64(DI) \
	VMOVDQU Y11, 96(DI) \
	VPADDQ  Y8, Y0, Y0 \
	VPADDQ  Y9, Y1, Y1 \
	VPSRLQ  $32, Y8, Y8 \
	VPSRLQ  $32, Y9, Y9 \
	VPADDQ  Y8, Y4, Y4 \
	VPADDQ  Y9, Y5, Y5 \
	VPADDQ  Y10, Y0, Y0 \
	VPADDQ  Y11, Y1, Y1 \
	VPSRLQ  $32, Y10, Y10 \
	VPSRLQ  $32, Y11, Y11 \
	VPADDQ  Y10, Y4, Y4 \
	VPADDQ  Y11, Y5, Y5 \
	SUBQ    $-128, SI \
	SUBQ    $-128, DI \
	CMPQ    SI, DX \
	JNE     c2loop \
c2rest: \
	CMPQ    CX, $32 \
	JB      c2reduce \
	VMOVDQU 0(SI), Y8 \
	VMOVDQU Y8, 0(DI) \
	VPADDQ  Y8, Y0, Y0 \
	VPSRLQ  $32, Y8, Y8 \
	VPADDQ  Y8, Y4, Y4 \
	CMPQ    CX, $64 \
	JB      c2last \
	VMOVDQU 32(SI), Y9 \
	VMOVDQU Y9, 32(DI) \
	VPADDQ  Y9, Y1, Y1 \
	VPSRLQ  $32, Y9, Y9 \
	VPADDQ  Y9, Y5, Y5 \
	CMPQ    CX, $96 \
	JB      c2last \
	VMOVDQU 64(SI), Y10 \
	VMOVDQU Y10, 64(DI) \
	VPADDQ  Y10, Y0, Y0 \
	VPSRLQ  $32, Y10, Y10 \
	VPADDQ  Y10, Y4, Y4 \
c2last: \
	MOVQ    CX, DX \
	ANDQ    $-32, DX \
	ADDQ    DX, SI \
	ADDQ    DX, DI \
	ANDQ    $31, CX \
c2reduce: \
	VPADDQ  Y1, Y0, Y0 \
	VPADDQ  Y5, Y4, Y4 \
	REDUCE256(Y0, Y4, X0, X1, Y1, AX) \
	VZEROUPPER

// ADDODD(xt, yt, ya) adds the odd last byte of the CX bytes at SI to the
// A accumulator ya alone (it has no high half), as the low byte of a
// lane. Clobbers R9 and yt (xt its low half).
#define ADDODD(xt, yt, ya) \
	MOVBQZX -1(SI)(CX*1), R9 \
	VMOVQ   R9, xt \
	VPADDQ  yt, ya, ya

// VFIRST makes sum's first 128 bytes at SI the first values of its AVX2
// kernel's accumulators (A in Y0 and Y1, H in Y4 and Y5). Clobbers Y8,
// Y9.
#define VFIRST \
	VMOVDQU 0(SI), Y0  \
	VMOVDQU 32(SI), Y1 \
	VMOVDQU 64(SI), Y8 \
	VMOVDQU 96(SI), Y9 \
	VPSRLQ  $32, Y0, Y4 \
	VPSRLQ  $32, Y1, Y5 \
	ACC2(Y8, Y9)

// VNEXT goes on after VFIRST: to the loop over the whole blocks after
// the first (DX its end pointer), or, with none, to what bits 6 and 5
// of n leave (vwholeRest).
#define VNEXT \
	SUBQ $-128, SI \
	MOVQ CX, DX    \
	ANDQ $-128, DX \
	SUBQ $128, DX  \
	JZ   vwholeRest \
	ADDQ SI, DX    \
	JMP  vloop

// VRET ends sum's AVX2 kernel: it adds the two pairs of accumulators
// together, reduces them and returns toBE of the sum.
#define VRET \
	VPADDQ Y1, Y0, Y0 \
	VPADDQ Y5, Y4, Y4 \
	REDUCE256(Y0, Y4, X0, X1, Y1, AX) \
	VZEROUPPER \
	FOLD \
	MOVL   AX, ret+16(FP) \
	RET

// VSRET ends sum's AVX2 kernel for n < 128: it reduces the one pair of
// accumulators and returns toBE of the sum.
#define VSRET \
	REDUCE256(Y1, Y5, X1, X2, Y2, AX) \
	VZEROUPPER \
	FOLD \
	MOVL   AX, ret+16(FP) \
	RET

// VSLAST(off) ends sum's kernel below 128 bytes with three whole
// vectors: it adds the one at off(SI) to the sum of the other two (A in
// Y2, H in Y6), that to the window's A and H (Y1, Y5), and returns.
#define VSLAST(off) \
	VMOVDQU off(SI), Y3 \
	VPSRLQ  $32, Y3, Y7 \
	VPADDQ  Y3, Y2, Y2  \
	VPADDQ  Y7, Y6, Y6  \
	VPADDQ  Y2, Y1, Y1  \
	VPADDQ  Y6, Y5, Y5  \
	VSRET

// func sum(p *byte, n int) uint32
//
// sum is Sum without the initial value, which Sum (inlined into its
// caller) adds in Go: the chain of dependent sums then waits for that add
// and the caller's own save of the value across the call, not for the
// argument and result slots here. It takes a pointer and a length, not a
// slice: the caller stores two words per call instead of three.
// It returns toBE of the data's sum. Five ranges, reached by comparisons
// with variables that setDispatch (sum_amd64.go) computes from the
// feature flags (midMax, then scalarMax or avx2Max, then avx512Max):
//
//   - n < scalarMax: add-with-carry code. Even lengths from 10 to 32
//     bytes take a path with no loop and one load per 8-byte word: the
//     whole words from the start, and the 8-byte word that ends at the
//     end of b shifted right to drop the bytes already summed (the shift
//     keeps every byte at its place in its word). Other lengths run the
//     64-byte loop and a tail of exact loads.
//   - scalarMax <= n < midMax (128 with AVX2): the AVX2 kernel for at
//     most four vectors, without a loop and with one pair of
//     accumulators: the last n%32 bytes as one 32-byte window that ends
//     at the end of b, with the bytes before them zeroed by a VPSHUFB
//     control from tailShuf, which also moves every byte to the place in
//     its 32-bit word that the scalar code gives it (the last vector
//     whole when n%32 is 0), then the whole vectors before it, added
//     together before they are added to the window's sums.
//   - midMax <= n <= avx2Max: the AVX2 kernel, inline: the first 128
//     bytes seed two pairs of accumulators, the window as above is added
//     to the second pair (none when n%32 is 0); then 128 bytes per loop
//     iteration, and up to three more vectors.
//   - avx2Max < n <= avx512Max (with AVX-512: from avx512Min bytes to
//     maxChunk): the AVX-512 kernel, inline (SUMAVX512).
//   - otherwise: without assembly (useAsm false, for the tests) and for
//     slices longer than maxChunk it tail-calls the Go function sumSlow;
//     else the scalar code.
TEXT ·sum(SB), NOSPLIT, $0-20
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	CMPQ CX, ·midMax(SB)
	JLT  below
	CMPQ CX, ·avx2Max(SB)
	JGT  other

	// The AVX2 kernel (n >= 128, or n >= 32 in the tests' configurations
	// where midMax is scalarMax): A in Y0 and Y1, H in Y4 and Y5 (see the
	// top of this file). The last n%32 bytes come first, so that their
	// loads are off the path to the result: the 32-byte window that ends
	// at the end of b, shuffled by tailShuf[n%32] (when n%32 is 0 there
	// is none: vwhole). From 128 bytes, as in vwhole, the first block's
	// first two vectors are the accumulators' first values and the other
	// two are added to them, and the window is added to A1 and H1; an odd last byte, which the control leaves out,
	// is added to A0 alone (it has no high half), as the low byte of a
	// lane. Below 128 bytes (vwsmall: only where the tests send them
	// here) the window is the first value of A1 and H1, and an odd last
	// byte that of A0. The loop runs to an end pointer (DX), so that it
	// carries two scalar instructions.
	MOVQ    CX, DX
	ANDQ    $31, DX
	JZ      vwhole // n%32 == 0: no tail window
	SHLQ    $5, DX
	LEAQ    ·tailShuf(SB), R9
	VMOVDQU -32(SI)(CX*1), Y10
	VPSHUFB (R9)(DX*1), Y10, Y10
	CMPQ    CX, $128
	JB      vwsmall
	VFIRST
	VPADDQ  Y10, Y1, Y1
	VPSRLQ  $32, Y10, Y10
	VPADDQ  Y10, Y5, Y5
	TESTQ   $1, CX
	JNZ     vodd2

vw2:
	VNEXT

vodd2:
	ADDODD(X8, Y8, Y0)
	JMP     vw2

vwsmall:
	// n < 128: only where the tests send them here (the avx2-loop
	// kernel set, and a maxChunk below 127: TestChunks, TestSumSlow).
	VMOVDQU Y10, Y1
	VPSRLQ  $32, Y1, Y5
	VPXOR   Y4, Y4, Y4
	TESTQ   $1, CX
	JNZ     vodd
	VPXOR   Y0, Y0, Y0

vloops:
	MOVQ CX, DX
	ANDQ $-128, DX
	JZ   vrest // n < 128
	ADDQ SI, DX
	JMP  vloop

	PCALIGN $64

vloop:
	VMOVDQU 0(SI), Y8
	VMOVDQU 32(SI), Y9
	VMOVDQU 64(SI), Y10
	VMOVDQU 96(SI), Y11
	ACC2(Y8, Y9)
	ACC2(Y10, Y11)
	SUBQ    $-128, SI
	CMPQ    SI, DX
	JNE     vloop

	TESTQ $96, CX
	JNZ   vrest
	VRET

vrest:
	// The remaining whole vectors, as bits 6 and 5 of n say: each case
	// returns on its own, so that none takes more than two branches.
	TESTQ   $64, CX
	JZ      vone
	VMOVDQU 0(SI), Y8
	VMOVDQU 32(SI), Y9
	ACC2(Y8, Y9)
	TESTQ   $32, CX
	JNZ     vthree
	VRET

vthree:
	VMOVDQU 64(SI), Y8
	VPADDQ  Y8, Y0, Y0
	VPSRLQ  $32, Y8, Y8
	VPADDQ  Y8, Y4, Y4
	VRET

vone:
	VMOVDQU 0(SI), Y8
	VPADDQ  Y8, Y0, Y0
	VPSRLQ  $32, Y8, Y8
	VPADDQ  Y8, Y4, Y4
	VRET

vodd:
	MOVBQZX -1(SI)(CX*1), R9
	VMOVQ   R9, X0 // zeroes the rest of Y0
	JMP     vloops

vwhole:
	// Whole vectors only (n is even), no window: the first vectors are
	// the accumulators' first values (no zeroing, and fewer adds), not a
	// window that the control would zero anyway, whose load and shuffle
	// would then come before the first add.
	CMPQ    CX, $128
	JB      vwhole96
	VFIRST
	VNEXT

vwholeRest:
	TESTQ $96, CX
	JNZ   vrest
	VRET

vwhole96:
	// 64 or 96 bytes: the first two vectors are the accumulators' first
	// values, and a third is added as in vrest.
	CMPQ    CX, $64
	JB      vwhole32
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VPSRLQ  $32, Y0, Y4
	VPSRLQ  $32, Y1, Y5
	TESTQ   $32, CX
	JNZ     vthree
	VRET

vwhole32:
	// Only the tests come here (the avx2-loop kernel set, where
	// scalarMax and midMax are 32, and a maxChunk below 127): by default
	// 32 bytes take the scalar code, and 33-127 bytes the loop-free
	// kernel.
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	JMP   vone

below:
	CMPQ CX, ·scalarMax(SB)
	JLT  small

	// The AVX2 kernel for 32 <= n < 128: one pair of accumulators, A in
	// Y1 and H in Y5, started from the 32-byte window that ends at the
	// end of b (shuffled by tailShuf[n%32]; vswhole when n%32 is 0), then
	// the whole vectors before it, as bits 6 and 5 of n say. An odd last
	// byte goes into A alone (it has no high half).
	MOVQ    CX, DX
	ANDQ    $31, DX
	JZ      vswhole
	SHLQ    $5, DX
	LEAQ    ·tailShuf(SB), R9
	VMOVDQU -32(SI)(CX*1), Y1
	VPSHUFB (R9)(DX*1), Y1, Y1
	VPSRLQ  $32, Y1, Y5
	TESTQ   $1, CX
	JNZ     vsodd

vsbody:
	// The whole vectors are added together first (their loads do not
	// wait for n), then to the window's A and H.
	TESTQ   $64, CX
	JZ      vs32
	VMOVDQU 0(SI), Y2
	VMOVDQU 32(SI), Y3
	VPSRLQ  $32, Y2, Y6
	VPSRLQ  $32, Y3, Y7
	VPADDQ  Y3, Y2, Y2
	VPADDQ  Y7, Y6, Y6
	TESTQ   $32, CX
	JNZ     vs96
	VPADDQ  Y2, Y1, Y1
	VPADDQ  Y6, Y5, Y5
	VSRET

vs96:
	VSLAST(64)

vs32:
	TESTQ   $32, CX
	JZ      vs0
	VMOVDQU 0(SI), Y2
	VPSRLQ  $32, Y2, Y6
	VPADDQ  Y2, Y1, Y1
	VPADDQ  Y6, Y5, Y5

vs0:
	VSRET

vsodd:
	ADDODD(X2, Y2, Y1)
	JMP     vsbody

vswhole:
	// n is 32, 64 or 96 (32 only in the tests' avx2 kernel set): whole
	// vectors, the last one first.
	VMOVDQU -32(SI)(CX*1), Y1
	VPSRLQ  $32, Y1, Y5
	CMPQ    CX, $64
	JB      vs0
	VMOVDQU 0(SI), Y2
	VPSRLQ  $32, Y2, Y6
	JA      vsw96
	VPADDQ  Y2, Y1, Y1
	VPADDQ  Y6, Y5, Y5
	VSRET

vsw96:
	VSLAST(32)

other:
	// From avx512Min bytes to maxChunk, the AVX-512 kernel, inline (a
	// call and a reload of the arguments less); avx512Max is -1 without
	// it.
	CMPQ CX, ·avx512Max(SB)
	JGT  checks
	XORL AX, AX
	SUMAVX512

checks:
	// The scalar chain has no limit; the vector kernels' lane sums do.
	CMPB ·useAsm(SB), $0
	JEQ  slow
	CMPQ CX, ·maxChunk(SB)
	JGT  slow
	JMP  scalar // not reached with dispatch's values: the safe answer

slow:
	JMP ·sumSlow(SB)

	PCALIGN $64

small:
	LEAQ -10(CX), DX
	RORQ $1, DX // odd n: bit 63 set
	CMPQ DX, $11
	JA   scalar // n odd, or n < 10, or n > 32 (unsigned)

	// n even, 10 <= n <= 32 (DX = (n-10)/2): the last word first,
	// shifted right by 64-8*(n%8) bits (mod 64: CL is -8n), then the
	// (n-1)/8 whole words before it.
	MOVQ -8(SI)(CX*1), AX
	NEGL CX
	SHLL $3, CX
	SHRQ CX, AX
	CMPQ DX, $3
	JBE  short16
	CMPQ DX, $7
	JBE  short24
	ADDQ 0(SI), AX
	ADCQ 8(SI), AX
	ADCQ 16(SI), AX
	ADCQ $0, AX
	FOLD
	MOVL AX, ret+16(FP)
	RET

short24:
	ADDQ 0(SI), AX
	ADCQ 8(SI), AX
	ADCQ $0, AX
	FOLD
	MOVL AX, ret+16(FP)
	RET

short16:
	ADDQ 0(SI), AX
	ADCQ $0, AX
	FOLD
	MOVL AX, ret+16(FP)
	RET

scalar:
	XORL AX, AX
	CMPQ CX, $8
	JB   tiny
	CMPQ CX, $64
	JB   tail
	JMP  loop64 // over the padding

	// Loops start at a 64-byte boundary, and fit in as few 64-byte blocks
	// of code as they can (immediates of one byte: -128, not 128): a loop
	// that spans one block more runs measurably slower (BenchmarkSumImpl),
	// depending on where the linker puts it.
	PCALIGN $64

loop64:
	ADDQ 0(SI), AX
	ADCQ 8(SI), AX
	ADCQ 16(SI), AX
	ADCQ 24(SI), AX
	ADCQ 32(SI), AX
	ADCQ 40(SI), AX
	ADCQ 48(SI), AX
	ADCQ 56(SI), AX
	ADCQ $0, AX
	ADDQ $64, SI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  loop64
	TESTQ CX, CX
	JZ    done

tail:
	// The last 0 < CX < 64 bytes (b has at least 8): an odd last byte
	// first, as the low byte of its word (the place every kernel gives
	// it: see tailShuf), then 32, 16 and 8 by exact loads, and the last
	// 2, 4 or 6 from the word that ends at the end of the even bytes,
	// shifted right as in the short path.
	TESTQ   $1, CX
	JZ      tail32
	MOVBQZX -1(SI)(CX*1), R9
	ADDQ    R9, AX
	ADCQ    $0, AX
	DECQ    CX

tail32:
	TESTQ $32, CX
	JZ    tail16
	ADDQ  0(SI), AX
	ADCQ  8(SI), AX
	ADCQ  16(SI), AX
	ADCQ  24(SI), AX
	ADCQ  $0, AX
	ADDQ  $32, SI

tail16:
	TESTQ $16, CX
	JZ    tail8
	ADDQ  0(SI), AX
	ADCQ  8(SI), AX
	ADCQ  $0, AX
	ADDQ  $16, SI

tail8:
	TESTQ $8, CX
	JZ    tail0
	ADDQ  0(SI), AX
	ADCQ  $0, AX
	ADDQ  $8, SI

tail0:
	ANDQ $6, CX
	JZ   done
	MOVQ -8(SI)(CX*1), R9
	NEGL CX
	SHLL $3, CX
	SHRQ CX, R9
	ADDQ R9, AX
	ADCQ $0, AX

done:
	FOLD
	MOVL AX, ret+16(FP)
	RET

tiny:
	SUMTINY
	FOLD
	MOVL AX, ret+16(FP)
	RET

// func copyAndSum(dst, src *byte, n int, initial uint32) uint32
//
// copyAndSum is CopyAndSum (which the compiler inlines into a call of
// it) of the n bytes at src into dst, which has room for them; pointers
// and a length, not two slices, so that the caller stores four argument
// words per call instead of seven. Slices shorter than copyVectorMin (all of them
// without AVX2) are copied and summed here, 64 bytes at a time by an
// add-with-carry chain over the words it loads and stores, then by exact
// loads and stores; longer ones go to the vector kernel the flags choose,
// by a tail call. Without assembly, and for slices longer than maxChunk,
// it tail-calls the Go function copySumSlow.
TEXT ·copyAndSum(SB), NOSPLIT, $0-36
	MOVQ n+16(FP), CX
	CMPB ·useAsm(SB), $0
	JEQ  slow
	CMPQ CX, ·copyVectorMin(SB)
	JGE  vector

scalar:
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	XORL AX, AX
	CMPQ CX, $64
	JB   tail
	JMP  loop64

	PCALIGN $64

loop64:
	MOVQ 0(SI), DX
	MOVQ 8(SI), R9
	MOVQ DX, 0(DI)
	MOVQ R9, 8(DI)
	ADDQ DX, AX
	ADCQ R9, AX
	MOVQ 16(SI), DX
	MOVQ 24(SI), R9
	MOVQ DX, 16(DI)
	MOVQ R9, 24(DI)
	ADCQ DX, AX
	ADCQ R9, AX
	MOVQ 32(SI), DX
	MOVQ 40(SI), R9
	MOVQ DX, 32(DI)
	MOVQ R9, 40(DI)
	ADCQ DX, AX
	ADCQ R9, AX
	MOVQ 48(SI), DX
	MOVQ 56(SI), R9
	MOVQ DX, 48(DI)
	MOVQ R9, 56(DI)
	ADCQ DX, AX
	ADCQ R9, AX
	ADCQ $0, AX
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  loop64

tail:
	COPYTAIL
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

vector:
	// As in sum: the checks fall through to the inlined AVX2 kernel.
	CMPQ CX, ·maxChunk(SB)
	JGT  slow
	CMPB ·useAVX512(SB), $0
	JNE  avx512
	CMPB ·useAVX2(SB), $0
	JEQ  scalar
	CMPQ CX, $32 // copyVectorMin is 0 in the tests
	JB   scalar
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	XORL  AX, AX
	COPYSUMAVX2
	TESTQ CX, CX
	JNZ   tail
	FINISH(initial+24(FP))
	MOVL  AX, ret+32(FP)
	RET

avx512:
	CMPQ CX, ·avx512CopyMin(SB)
	JLT  avx2
	JMP  ·copySumAVX512(SB)

avx2:
	JMP ·copySumAVX2(SB)

slow:
	JMP ·copySumSlow(SB)

// func copySumAVX2(dst, src *byte, n int, initial uint32) uint32
TEXT ·copySumAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORL AX, AX
	CMPQ CX, $32
	JB   tail
	COPYSUMAVX2

tail:
	COPYTAIL
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

// func sumAVX512(p *byte, n int) uint32
//
// sum's AVX-512 kernel (SUMAVX512) on its own, for the tests, which call
// it with every length: below 32 bytes the scalar tail.
TEXT ·sumAVX512(SB), NOSPLIT, $0-20
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	XORL AX, AX
	CMPQ CX, $32
	JB   scalar
	SUMAVX512

scalar:
	CMPQ CX, $8
	JB   tiny
	SUMTAIL
	FOLD
	MOVL AX, ret+16(FP)
	RET

tiny:
	SUMTINY
	FOLD
	MOVL AX, ret+16(FP)
	RET

// func copySumAVX512(dst, src *byte, n int, initial uint32) uint32
TEXT ·copySumAVX512(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORL AX, AX
	CMPQ CX, $32
	JB   tail

	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7

	CMPQ CX, $256
	JB   loop64
	JMP  loop256

	PCALIGN $64

loop256:
	VMOVDQU64 0(SI), Z8
	VMOVDQU64 64(SI), Z9
	VMOVDQU64 128(SI), Z10
	VMOVDQU64 192(SI), Z11
	VMOVDQU64 Z8, 0(DI)
	VMOVDQU64 Z9, 64(DI)
	VMOVDQU64 Z10, 128(DI)
	VMOVDQU64 Z11, 192(DI)
	VPADDQ    Z8, Z0, Z0
	VPADDQ    Z9, Z1, Z1
	VPADDQ    Z10, Z2, Z2
	VPADDQ    Z11, Z3, Z3
	VPSRLQ    $32, Z8, Z8
	VPSRLQ    $32, Z9, Z9
	VPSRLQ    $32, Z10, Z10
	VPSRLQ    $32, Z11, Z11
	VPADDQ    Z8, Z4, Z4
	VPADDQ    Z9, Z5, Z5
	VPADDQ    Z10, Z6, Z6
	VPADDQ    Z11, Z7, Z7
	ADDQ      $256, SI
	ADDQ      $256, DI
	SUBQ      $256, CX
	CMPQ      CX, $256
	JAE       loop256

loop64:
	CMPQ      CX, $64
	JB        fold
	VMOVDQU64 (SI), Z8
	VMOVDQU64 Z8, (DI)
	VPADDQ    Z8, Z0, Z0
	VPSRLQ    $32, Z8, Z8
	VPADDQ    Z8, Z4, Z4
	ADDQ      $64, SI
	ADDQ      $64, DI
	SUBQ      $64, CX
	JMP       loop64

fold:
	// As in sumAVX512: 256 bits, at most one 32-byte step, then the
	// exact scalar tail.
	VPADDQ Z1, Z0, Z0
	VPADDQ Z3, Z2, Z2
	VPADDQ Z2, Z0, Z0
	VPADDQ Z5, Z4, Z4
	VPADDQ Z7, Z6, Z6
	VPADDQ Z6, Z4, Z4
	REDUCE512(Z0, Z4, Y0, Y4, Y1)
	CMPQ    CX, $32
	JB      reduce
	VMOVDQU (SI), Y8
	VMOVDQU Y8, (DI)
	VPADDQ  Y8, Y0, Y0
	VPSRLQ  $32, Y8, Y8
	VPADDQ  Y8, Y4, Y4
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX

reduce:
	REDUCE256(Y0, Y4, X0, X1, Y1, DX)
	VZEROUPPER
	ADDQ   DX, AX
	ADCQ   $0, AX

tail:
	COPYTAIL
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET
