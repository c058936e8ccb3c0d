//go:build amd64 && gc && !purego

#include "textflag.h"

// The vector kernels add 64-bit little-endian lanes without carries: a
// lane x is added whole to a wrapping accumulator A and its high half
// x>>32 to H; at the end sum(lo) = A - H<<32 exactly, and sum(lo) +
// sum(hi) is the lanes' worth modulo 0xFFFF (see sum_go.go). The Go side
// passes at most 1 GiB per call, so no lane sum reaches 2^64 and the lanes
// can be added together without carries. The scalar kernels and every
// tail use an ADD/ADC chain on general registers.
//
// No kernel reads or writes a byte outside its slices, not even under an
// all-zero mask: a masked load whose masked-off bytes fall on a page that
// is not present takes a slow microcode assist (TestGuardPage checks the
// bounds; BenchmarkSum/4096/page-end against /4096/mid-page shows the
// time). Tails are summed by exact loads, or by an 8-byte load that ends
// at the last byte and starts inside the slice.

// SUMTAIL adds the last CX < 64 bytes at SI to AX (no carry pending) and
// leaves the sum, with its carries folded in, in AX. The slice is at least
// 8 bytes long. Clobbers CX, SI, R9.
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
	VPSUBQ       y1, ya, ya   \
	VPADDQ       yh, ya, ya   \
	VEXTRACTI128 $1, ya, x1   \
	VPADDQ       x1, xa, xa   \
	VPSHUFD      $0x4e, xa, x1 \
	VPADDQ       x1, xa, xa   \
	VMOVQ        xa, r

// REDUCE512 folds the 512-bit accumulators za (A) and zh (H) to 256 bits
// in ya and yh. Clobbers y1.
#define REDUCE512(za, zh, ya, yh, y1) \
	VEXTRACTI64X4 $1, za, y1 \
	VPADDQ        y1, ya, ya \
	VEXTRACTI64X4 $1, zh, y1 \
	VPADDQ        y1, yh, yh

// SUMAVX2 sums the CX >= 32 bytes at SI with 256-bit vectors, 128 bytes
// per iteration into two pairs of accumulators (A in Y0-Y1, H in Y4-Y5),
// then up to three more vectors without a loop, and leaves the last
// CX < 32 bytes at SI for SUMTAIL, with the vectors' sum in AX. The loop
// runs to an end pointer (DX), so that it carries two scalar
// instructions. Clobbers DX, Y0-Y11.
#define SUMAVX2 \
	SUMAVX2VEC \
	REDUCE256(Y0, Y4, X0, X1, Y1, AX) \
	VZEROUPPER

// SUMAVX2VEC is SUMAVX2 without the reduction: it leaves the vectors' sum
// in A (Y0) and H (Y4), so that sum can add its last bytes as one more
// (masked) vector before it reduces them.
#define SUMAVX2VEC \
	VPXOR   Y0, Y0, Y0 \
	VPXOR   Y1, Y1, Y1 \
	VPXOR   Y4, Y4, Y4 \
	VPXOR   Y5, Y5, Y5 \
	MOVQ    CX, DX \
	ANDQ    $-128, DX \
	JZ      v2rest \
	ADDQ    SI, DX \
	ANDQ    $127, CX \
	JMP     v2loop \
	PCALIGN $64 \
v2loop: \
	VMOVDQU 0(SI), Y8 \
	VMOVDQU 32(SI), Y9 \
	VMOVDQU 64(SI), Y10 \
	VMOVDQU 96(SI), Y11 \
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
	CMPQ    SI, DX \
	JNE     v2loop \
v2rest: \
	CMPQ    CX, $32 \
	JB      v2reduce \
	VMOVDQU 0(SI), Y8 \
	VPADDQ  Y8, Y0, Y0 \
	VPSRLQ  $32, Y8, Y8 \
	VPADDQ  Y8, Y4, Y4 \
	CMPQ    CX, $64 \
	JB      v2last \
	VMOVDQU 32(SI), Y9 \
	VPADDQ  Y9, Y1, Y1 \
	VPSRLQ  $32, Y9, Y9 \
	VPADDQ  Y9, Y5, Y5 \
	CMPQ    CX, $96 \
	JB      v2last \
	VMOVDQU 64(SI), Y10 \
	VPADDQ  Y10, Y0, Y0 \
	VPSRLQ  $32, Y10, Y10 \
	VPADDQ  Y10, Y4, Y4 \
v2last: \
	MOVQ    CX, DX \
	ANDQ    $-32, DX \
	ADDQ    DX, SI \
	ANDQ    $31, CX \
v2reduce: \
	VPADDQ  Y1, Y0, Y0 \
	VPADDQ  Y5, Y4, Y4

// COPYSUMAVX2 is SUMAVX2 that also stores what it loads, from SI to DI
// (CX >= 32 bytes), and leaves the last CX < 32 bytes for COPYTAIL.
// Clobbers DX, Y0-Y11.
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

// tailMask is 32 zero bytes, then 32 bytes of ones: the 32 bytes at
// tailMask+r keep the last r bytes of a 32-byte window (sum). At
// tailMask+64 follow two VPSHUFB controls: the identity, and the swap of
// the 16-bit halves of every 32-bit word. The scalar code sums the last
// bytes of b at their place in b's 32-bit words; a window that starts 2
// bytes off that grid has every 16-bit word in the other half of its
// 32-bit word, which the swap puts back, so that every kernel returns
// the same partial sum (a swap is worth the same modulo 0xFFFF).
DATA ·tailMask+0(SB)/8, $0x0
DATA ·tailMask+8(SB)/8, $0x0
DATA ·tailMask+16(SB)/8, $0x0
DATA ·tailMask+24(SB)/8, $0x0
DATA ·tailMask+32(SB)/8, $-1
DATA ·tailMask+40(SB)/8, $-1
DATA ·tailMask+48(SB)/8, $-1
DATA ·tailMask+56(SB)/8, $-1
DATA ·tailMask+64(SB)/8, $0x706050403020100
DATA ·tailMask+72(SB)/8, $0xf0e0d0c0b0a0908
DATA ·tailMask+80(SB)/8, $0x706050403020100
DATA ·tailMask+88(SB)/8, $0xf0e0d0c0b0a0908
DATA ·tailMask+96(SB)/8, $0x504070601000302
DATA ·tailMask+104(SB)/8, $0xd0c0f0e09080b0a
DATA ·tailMask+112(SB)/8, $0x504070601000302
DATA ·tailMask+120(SB)/8, $0xd0c0f0e09080b0a
GLOBL ·tailMask(SB), RODATA|NOPTR, $128

// func sum(b []byte, initial uint32) uint32
//
// sum is Sum (which the compiler inlines into a call of it): slices
// shorter than vectorMin (all of them without AVX2) are summed here by one
// add-with-carry chain; longer ones by the AVX2 kernel, which is inlined
// here (SUMAVX2VEC, sumAVX2's vector loop, then the last 0-31 bytes as one
// masked 32-byte window ending at the end of b), or by a tail call to the
// AVX-512 kernel where the flags in sum_amd64.go choose it (the kernels
// take the same arguments). Without assembly (useAsm false, for the tests) and for
// slices longer than maxChunk it tail-calls the Go function sumSlow.
TEXT ·sum(SB), NOSPLIT, $0-36
	MOVQ b_len+8(FP), CX
	CMPB ·useAsm(SB), $0
	JEQ  slow
	CMPQ CX, ·vectorMin(SB)
	JGE  vector

scalar:
	MOVQ b_base+0(FP), SI
	XORL AX, AX
	CMPQ CX, $8
	JB   tiny
	CMPQ CX, $64
	JB   tail
	JMP  loop64 // over the padding

	// Loops start at a 64-byte boundary, and fit in as few 64-byte blocks
	// of code as they can (immediates of one byte: -128, not 128): a loop
	// that spanned one block more ran 1.2-1.5x slower here, depending on
	// where the linker put it (compare BenchmarkSumImpl/avx2 with csumbench).
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

tail:
	SUMTAIL
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

tiny:
	SUMTINY
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

vector:
	// Every check falls through on the way to the AVX2 kernel, which is
	// inlined here: the taken branches and the jump to sumAVX2 cost about
	// 1 ns a call (csum vs csumbench in one process, 512 B).
	// The scalar chain has no limit; the vector kernels' lane sums do.
	CMPQ CX, ·maxChunk(SB)
	JGT  slow
	CMPB ·useAVX512(SB), $0
	JNE  avx512
	CMPB ·useAVX2(SB), $0
	JEQ  scalar
	CMPQ CX, $32 // vectorMin is 0 in the tests
	JB   scalar
	MOVQ  b_base+0(FP), SI
	SUMAVX2VEC
	TESTQ CX, CX
	JNZ   vtail
	// No tail: return here, two taken branches fewer.
	REDUCE256(Y0, Y4, X0, X1, Y1, AX)
	VZEROUPPER
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

vtail:
	// The last 0 < CX < 32 bytes: the 32 bytes that end at the end of b
	// (b has at least 32), the ones already summed masked off with
	// tailMask, no branch on the length. An odd last byte goes into A
	// first, so that the window starts at an even offset of b.
	TESTQ $1, CX
	JNZ   vodd

vwin:
	LEAQ    ·tailMask(SB), R9
	VMOVDQU -32(SI)(CX*1), Y8
	VPAND   (R9)(CX*1), Y8, Y8
	MOVL    CX, DX
	ANDL    $2, DX
	SHLL    $4, DX
	VPSHUFB 64(R9)(DX*1), Y8, Y8 // the swap when the window starts 2 bytes off
	VPADDQ  Y8, Y0, Y0
	VPSRLQ  $32, Y8, Y8
	VPADDQ  Y8, Y4, Y4
	REDUCE256(Y0, Y4, X0, X1, Y1, AX)
	VZEROUPPER
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

vodd:
	// The byte's 64-bit lane has no high half: A only.
	MOVBQZX -1(SI)(CX*1), R9
	DECQ    CX
	VMOVQ   R9, X9
	VPADDQ  Y9, Y0, Y0
	JMP     vwin

avx512:
	CMPQ CX, ·avx512Min(SB)
	JLT  avx2
	JMP  ·sumAVX512(SB)

avx2:
	JMP ·sumAVX2(SB)

slow:
	JMP ·sumSlow(SB)

// func copyAndSum(dst []byte, src []byte, initial uint32) uint32
//
// copyAndSum is CopyAndSum (which the compiler inlines into a call of it),
// len(dst) >= len(src): slices shorter than copyVectorMin (all of them
// without AVX2) are copied and summed here, 64 bytes at a time by an
// add-with-carry chain over the words it loads and stores, then by exact
// loads and stores; longer ones go to the vector kernel the flags choose,
// by a tail call. Without assembly, and for slices longer than maxChunk,
// it tail-calls the Go function copySumSlow.
TEXT ·copyAndSum(SB), NOSPLIT, $0-60
	MOVQ src_len+32(FP), CX
	CMPB ·useAsm(SB), $0
	JEQ  slow
	CMPQ CX, ·copyVectorMin(SB)
	JGE  vector

scalar:
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
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
	FINISH(initial+48(FP))
	MOVL AX, ret+56(FP)
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
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	XORL  AX, AX
	COPYSUMAVX2
	TESTQ CX, CX
	JNZ   tail
	FINISH(initial+48(FP))
	MOVL  AX, ret+56(FP)
	RET

avx512:
	CMPQ CX, ·avx512CopyMin(SB)
	JLT  avx2
	JMP  ·copySumAVX512(SB)

avx2:
	JMP ·copySumAVX2(SB)

slow:
	JMP ·copySumSlow(SB)

// func sumAVX2(b []byte, initial uint32) uint32
TEXT ·sumAVX2(SB), NOSPLIT, $0-36
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	XORL AX, AX
	CMPQ CX, $32
	JB   scalar
	SUMAVX2

scalar:
	CMPQ b_len+8(FP), $8
	JB   tiny
	SUMTAIL
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

tiny:
	SUMTINY
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

// func copySumAVX2(dst []byte, src []byte, initial uint32) uint32
TEXT ·copySumAVX2(SB), NOSPLIT, $0-60
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	XORL AX, AX
	CMPQ CX, $32
	JB   tail
	COPYSUMAVX2

tail:
	COPYTAIL
	FINISH(initial+48(FP))
	MOVL AX, ret+56(FP)
	RET

// func sumAVX512(b []byte, initial uint32) uint32
TEXT ·sumAVX512(SB), NOSPLIT, $0-36
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	XORL AX, AX
	CMPQ CX, $32
	JB   scalar

	VPXORQ Z0, Z0, Z0 // A0
	VPXORQ Z1, Z1, Z1 // A1
	VPXORQ Z2, Z2, Z2 // A2
	VPXORQ Z3, Z3, Z3 // A3
	VPXORQ Z4, Z4, Z4 // H0
	VPXORQ Z5, Z5, Z5 // H1
	VPXORQ Z6, Z6, Z6 // H2
	VPXORQ Z7, Z7, Z7 // H3

	CMPQ CX, $256
	JB   loop64
	JMP  loop256

	PCALIGN $64

loop256:
	VMOVDQU64 0(SI), Z8
	VMOVDQU64 64(SI), Z9
	VMOVDQU64 128(SI), Z10
	VMOVDQU64 192(SI), Z11
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
	SUBQ      $256, CX
	CMPQ      CX, $256
	JAE       loop256

loop64:
	CMPQ      CX, $64
	JB        fold
	VMOVDQU64 (SI), Z8
	VPADDQ    Z8, Z0, Z0
	VPSRLQ    $32, Z8, Z8
	VPADDQ    Z8, Z4, Z4
	ADDQ      $64, SI
	SUBQ      $64, CX
	JMP       loop64

fold:
	// Down to 256 bits (the VEX instructions below clear the upper
	// halves), then at most one 32-byte load and the scalar tail: every
	// load stays inside b.
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
	VPADDQ  Y8, Y0, Y0
	VPSRLQ  $32, Y8, Y8
	VPADDQ  Y8, Y4, Y4
	ADDQ    $32, SI
	SUBQ    $32, CX

reduce:
	REDUCE256(Y0, Y4, X0, X1, Y1, DX)
	VZEROUPPER
	ADDQ   DX, AX
	ADCQ   $0, AX

scalar:
	CMPQ b_len+8(FP), $8
	JB   tiny
	SUMTAIL
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

tiny:
	SUMTINY
	FINISH(initial+24(FP))
	MOVL AX, ret+32(FP)
	RET

// func copySumAVX512(dst []byte, src []byte, initial uint32) uint32
TEXT ·copySumAVX512(SB), NOSPLIT, $0-60
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
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
	FINISH(initial+48(FP))
	MOVL AX, ret+56(FP)
	RET
