//go:build amd64 && gc && !purego

#include "textflag.h"

// The three kernels below copy the aligned body of a Copy: dst is 64-byte
// aligned, n is a positive multiple of 64, src has any alignment. Loads are
// ordinary (the source is usually hot in the cache); stores are nontemporal
// and fill whole cache lines, so no write-combining buffer is flushed half
// full. None of them fences: the caller does, once per batch (Fence).

// func ntAVX512(dst *byte, src *byte, n int)
TEXT ·ntAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $256
	JB   avx512tail

avx512loop:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVNTDQ  Z0, (DI)
	VMOVNTDQ  Z1, 64(DI)
	VMOVNTDQ  Z2, 128(DI)
	VMOVNTDQ  Z3, 192(DI)
	ADDQ      $256, SI
	ADDQ      $256, DI
	SUBQ      $256, CX
	CMPQ      CX, $256
	JAE       avx512loop

avx512tail:
	TESTQ CX, CX
	JZ    avx512done

avx512line:
	VMOVDQU64 (SI), Z0
	VMOVNTDQ  Z0, (DI)
	ADDQ      $64, SI
	ADDQ      $64, DI
	SUBQ      $64, CX
	JNZ       avx512line

avx512done:
	VZEROUPPER
	RET

// func ntAVX2(dst *byte, src *byte, n int)
TEXT ·ntAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $256
	JB   avx2tail

avx2loop:
	VMOVDQU  (SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVDQU  64(SI), Y2
	VMOVDQU  96(SI), Y3
	VMOVDQU  128(SI), Y4
	VMOVDQU  160(SI), Y5
	VMOVDQU  192(SI), Y6
	VMOVDQU  224(SI), Y7
	VMOVNTDQ Y0, (DI)
	VMOVNTDQ Y1, 32(DI)
	VMOVNTDQ Y2, 64(DI)
	VMOVNTDQ Y3, 96(DI)
	VMOVNTDQ Y4, 128(DI)
	VMOVNTDQ Y5, 160(DI)
	VMOVNTDQ Y6, 192(DI)
	VMOVNTDQ Y7, 224(DI)
	ADDQ     $256, SI
	ADDQ     $256, DI
	SUBQ     $256, CX
	CMPQ     CX, $256
	JAE      avx2loop

avx2tail:
	TESTQ CX, CX
	JZ    avx2done

avx2line:
	VMOVDQU  (SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVNTDQ Y0, (DI)
	VMOVNTDQ Y1, 32(DI)
	ADDQ     $64, SI
	ADDQ     $64, DI
	SUBQ     $64, CX
	JNZ      avx2line

avx2done:
	VZEROUPPER
	RET

// func ntSSE2(dst *byte, src *byte, n int)
TEXT ·ntSSE2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

sse2line:
	MOVOU  (SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	MOVNTO X0, (DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ   $64, SI
	ADDQ   $64, DI
	SUBQ   $64, CX
	JNZ    sse2line
	RET

// func Fence()
TEXT ·Fence(SB), NOSPLIT, $0-0
	SFENCE
	RET
