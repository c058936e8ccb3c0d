//go:build ignore

// The line above keeps the go command from taking this file for a cgo
// source of package cbench (the harness builds it with gcc).

/*
 * csumbench: the C counterpart of csum's Sum and CopyAndSum benchmarks,
 * each kernel written the way a careful C data plane would, so that every
 * Go kernel is set against its like:
 *
 *   adc     a scalar add-with-carry chain, 64 bytes per iteration in
 *           inline assembly (as Linux's csum_partial on x86-64), then 32,
 *           16 and 8 bytes and a last partial word;
 *   avx2    256-bit vectors, csum's scheme: each 64-bit lane added whole
 *           to an accumulator A and its high half to H (sum of the low
 *           halves = A - H<<32), four pairs of accumulators, 128 bytes per
 *           iteration, the tail by the adc code;
 *   avx512  the same with 512-bit vectors, 256 bytes per iteration, only
 *           where the CPU has AVX-512 (F and BW);
 *   memcpy  glibc's, the floor for the fused copy.
 *
 * copy_and_sum has avx2 and avx512 kernels that store what they load. No
 * kernel reads or writes a byte outside its buffers: the last partial word
 * is the 8-byte word that ends at the end of the buffer, shifted right
 * (buffers of 8 bytes or more), or exact loads.
 *
 * Each call takes the previous call's sum as its initial value, as the Go
 * benchmarks do (s = Sum(buf, s)), and the kernels are not inlined into
 * the timing loop, so that nothing is hoisted out of it. Like csum's
 * kernels, they sum the data from 0 and add the initial value last, so
 * that the chain of calls does not wait for it. Every kernel
 * is checked against a byte-pair reference at every length up to 300 and
 * near each size before it is timed.
 *
 * Output: one JSON line per (function, kernel, size):
 *   {"bench":"sum","impl":"avx512","size":1500,"ns":N,"gbps":G}
 * ns is the best time per call over -r rounds of about -t ms (or -u
 * microseconds) each: on a shared machine many short rounds (-u 20 -r 2000)
 * find undisturbed ones where a few long ones do not. gbps is
 * size / ns (GB/s, 10^9 bytes per second).
 *
 * Build: gcc -O3 -march=native -o csumbench bench/c/csumbench.c
 *        (sh bench/c/build.sh csumbench does this)
 * Run:   csumbench [-t MS | -u US] [-r ROUNDS] [SIZE...]   (default 1500 65536)
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ref_sum is the byte-pair reference: big-endian 16-bit words, folded. */
static uint32_t ref_sum(const uint8_t *p, size_t n, uint32_t init)
{
	uint64_t s = init;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint32_t)s;
}

static uint32_t fold16(uint32_t s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

/*
 * The kernels return a 32-bit partial sum of big-endian words (as csum.Sum)
 * from a 64-bit accumulator of little-endian words: fold to 32 bits with
 * the end-around carry, then rotate by 8 (a byte swap of every 16-bit
 * word, modulo 0xffff).
 */
static inline uint32_t to_be(uint64_t acc)
{
	uint32_t lo = (uint32_t)acc, hi = (uint32_t)(acc >> 32);
	uint32_t s = lo + hi;

	s += s < lo;
	return (s << 8) | (s >> 24);
}

static inline uint64_t from_be(uint32_t init) { return (uint64_t)((init << 8) | (init >> 24)); }

static inline uint64_t adc64(uint64_t a, uint64_t b)
{
	__asm__("addq %1, %0\n\tadcq $0, %0" : "+r"(a) : "r"(b) : "cc");
	return a;
}

/*
 * adc_tail adds the last n < 64 bytes at p to acc; the buffer holds at
 * least 8 bytes (p - 8 + n is inside it) when whole is 1.
 */
static inline uint64_t adc_tail(const uint8_t *p, size_t n, uint64_t acc, int whole)
{
	uint64_t w;
	uint32_t l;
	uint16_t h;

	if (!whole) { /* fewer than 8 bytes in all */
		if (n & 4) {
			memcpy(&l, p, 4);
			acc = adc64(acc, l);
			p += 4;
		}
		if (n & 2) {
			memcpy(&h, p, 2);
			acc = adc64(acc, h);
			p += 2;
		}
		if (n & 1)
			acc = adc64(acc, *p);
		return acc;
	}
	if (n & 1) /* the odd last byte is the low byte of its word */
		acc = adc64(acc, p[--n]);
	if (n & 32) {
		__asm__("addq 0(%[p]), %[a]\n\tadcq 8(%[p]), %[a]\n\tadcq 16(%[p]), %[a]\n\t"
			"adcq 24(%[p]), %[a]\n\tadcq $0, %[a]"
			: [a] "+r"(acc) : [p] "r"(p), "m"(*(const uint8_t(*)[32])p) : "cc");
		p += 32;
	}
	if (n & 16) {
		__asm__("addq 0(%[p]), %[a]\n\tadcq 8(%[p]), %[a]\n\tadcq $0, %[a]"
			: [a] "+r"(acc) : [p] "r"(p), "m"(*(const uint8_t(*)[16])p) : "cc");
		p += 16;
	}
	if (n & 8) {
		memcpy(&w, p, 8);
		acc = adc64(acc, w);
		p += 8;
	}
	n &= 6;
	if (n) {
		memcpy(&w, p + n - 8, 8); /* ends at the end of the buffer */
		acc = adc64(acc, w >> (64 - 8 * n));
	}
	return acc;
}

__attribute__((noinline)) static uint32_t sum_adc(const uint8_t *p, size_t n, uint32_t init)
{
	uint64_t acc = 0; /* init is added last: the chain need not wait for it */
	int whole = n >= 8;

	for (; n >= 64; n -= 64, p += 64)
		__asm__("addq 0(%[p]), %[a]\n\tadcq 8(%[p]), %[a]\n\tadcq 16(%[p]), %[a]\n\t"
			"adcq 24(%[p]), %[a]\n\tadcq 32(%[p]), %[a]\n\tadcq 40(%[p]), %[a]\n\t"
			"adcq 48(%[p]), %[a]\n\tadcq 56(%[p]), %[a]\n\tadcq $0, %[a]"
			: [a] "+r"(acc) : [p] "r"(p), "m"(*(const uint8_t(*)[64])p) : "cc");
	return to_be(adc64(adc_tail(p, n, acc, whole), from_be(init)));
}

/* reduce256 returns the lanes' worth of accumulators A and H, added across. */
__attribute__((target("avx2"))) static inline uint64_t reduce256(__m256i a, __m256i h)
{
	__m256i v = _mm256_add_epi64(_mm256_sub_epi64(a, _mm256_slli_epi64(h, 32)), h);
	__m128i x = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));

	return (uint64_t)_mm_cvtsi128_si64(x) + (uint64_t)_mm_extract_epi64(x, 1);
}

#define ACC256(a, h, v) \
	do { \
		a = _mm256_add_epi64(a, v); \
		h = _mm256_add_epi64(h, _mm256_srli_epi64(v, 32)); \
	} while (0)

/*
 * sum_avx2 and copy_sum_avx2 (COPY 0 or 1) share one body. Callers pass
 * at most 1 GiB, so no lane sum of A or H wraps in a way that matters (see
 * csum/sum_amd64.s).
 */
#define AVX2_BODY(COPY) \
	uint64_t acc = 0; \
	int whole = n >= 8; \
	if (n >= 32) { \
		__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0; \
		__m256i h0 = a0, h1 = a0, h2 = a0, h3 = a0; \
		for (; n >= 128; n -= 128, p += 128) { \
			__m256i v0 = _mm256_loadu_si256((const __m256i *)p); \
			__m256i v1 = _mm256_loadu_si256((const __m256i *)(p + 32)); \
			__m256i v2 = _mm256_loadu_si256((const __m256i *)(p + 64)); \
			__m256i v3 = _mm256_loadu_si256((const __m256i *)(p + 96)); \
			if (COPY) { \
				_mm256_storeu_si256((__m256i *)dst, v0); \
				_mm256_storeu_si256((__m256i *)(dst + 32), v1); \
				_mm256_storeu_si256((__m256i *)(dst + 64), v2); \
				_mm256_storeu_si256((__m256i *)(dst + 96), v3); \
				dst += 128; \
			} \
			ACC256(a0, h0, v0); \
			ACC256(a1, h1, v1); \
			ACC256(a2, h2, v2); \
			ACC256(a3, h3, v3); \
		} \
		for (; n >= 32; n -= 32, p += 32) { \
			__m256i v = _mm256_loadu_si256((const __m256i *)p); \
			if (COPY) { \
				_mm256_storeu_si256((__m256i *)dst, v); \
				dst += 32; \
			} \
			ACC256(a0, h0, v); \
		} \
		a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)); \
		h0 = _mm256_add_epi64(_mm256_add_epi64(h0, h1), _mm256_add_epi64(h2, h3)); \
		acc = adc64(acc, reduce256(a0, h0)); \
	} \
	if (COPY) \
		memcpy(dst, p, n); \
	return to_be(adc64(adc_tail(p, n, acc, whole), from_be(init)));

__attribute__((noinline, target("avx2"))) static uint32_t sum_avx2(const uint8_t *p, size_t n, uint32_t init)
{
	uint8_t *dst = NULL;

	(void)dst;
	AVX2_BODY(0)
}

__attribute__((noinline, target("avx2"))) static uint32_t copy_sum_avx2(uint8_t *dst, const uint8_t *p, size_t n,
									 uint32_t init)
{
	AVX2_BODY(1)
}

#define ACC512(a, h, v) \
	do { \
		a = _mm512_add_epi64(a, v); \
		h = _mm512_add_epi64(h, _mm512_srli_epi64(v, 32)); \
	} while (0)

/* sum_avx512 and copy_sum_avx512: AVX2_BODY with 512-bit vectors. */
#define AVX512_BODY(COPY) \
	uint64_t acc = 0; \
	int whole = n >= 8; \
	if (n >= 64) { \
		__m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0; \
		__m512i h0 = a0, h1 = a0, h2 = a0, h3 = a0; \
		for (; n >= 256; n -= 256, p += 256) { \
			__m512i v0 = _mm512_loadu_si512(p); \
			__m512i v1 = _mm512_loadu_si512(p + 64); \
			__m512i v2 = _mm512_loadu_si512(p + 128); \
			__m512i v3 = _mm512_loadu_si512(p + 192); \
			if (COPY) { \
				_mm512_storeu_si512(dst, v0); \
				_mm512_storeu_si512(dst + 64, v1); \
				_mm512_storeu_si512(dst + 128, v2); \
				_mm512_storeu_si512(dst + 192, v3); \
				dst += 256; \
			} \
			ACC512(a0, h0, v0); \
			ACC512(a1, h1, v1); \
			ACC512(a2, h2, v2); \
			ACC512(a3, h3, v3); \
		} \
		for (; n >= 64; n -= 64, p += 64) { \
			__m512i v = _mm512_loadu_si512(p); \
			if (COPY) { \
				_mm512_storeu_si512(dst, v); \
				dst += 64; \
			} \
			ACC512(a0, h0, v); \
		} \
		a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)); \
		h0 = _mm512_add_epi64(_mm512_add_epi64(h0, h1), _mm512_add_epi64(h2, h3)); \
		__m256i a = _mm256_add_epi64(_mm512_castsi512_si256(a0), _mm512_extracti64x4_epi64(a0, 1)); \
		__m256i h = _mm256_add_epi64(_mm512_castsi512_si256(h0), _mm512_extracti64x4_epi64(h0, 1)); \
		if (n >= 32) { \
			__m256i v = _mm256_loadu_si256((const __m256i *)p); \
			if (COPY) { \
				_mm256_storeu_si256((__m256i *)dst, v); \
				dst += 32; \
			} \
			ACC256(a, h, v); \
			n -= 32; \
			p += 32; \
		} \
		acc = adc64(acc, reduce256(a, h)); \
	} \
	if (COPY) \
		memcpy(dst, p, n); \
	return to_be(adc64(adc_tail(p, n, acc, whole), from_be(init)));

__attribute__((noinline, target("avx512f,avx512bw,avx2"))) static uint32_t sum_avx512(const uint8_t *p, size_t n,
										      uint32_t init)
{
	uint8_t *dst = NULL;

	(void)dst;
	AVX512_BODY(0)
}

__attribute__((noinline, target("avx512f,avx512bw,avx2"))) static uint32_t copy_sum_avx512(uint8_t *dst,
											   const uint8_t *p, size_t n,
											   uint32_t init)
{
	AVX512_BODY(1)
}

__attribute__((noinline)) static uint32_t copy_memcpy(uint8_t *dst, const uint8_t *src, size_t n, uint32_t init)
{
	memcpy(dst, src, n);
	return init;
}

typedef uint32_t (*sum_fn)(const uint8_t *, size_t, uint32_t);
typedef uint32_t (*copy_fn)(uint8_t *, const uint8_t *, size_t, uint32_t);

struct kernel {
	const char *bench, *impl;
	sum_fn sum;   /* either */
	copy_fn copy; /* or */
	int avx512;   /* needs AVX-512 */
	int check;    /* compare with the reference */
};

static const struct kernel kernels[] = {
	{ "sum", "adc", sum_adc, NULL, 0, 1 },
	{ "sum", "avx2", sum_avx2, NULL, 0, 1 },
	{ "sum", "avx512", sum_avx512, NULL, 1, 1 },
	{ "copy_and_sum", "avx2", NULL, copy_sum_avx2, 0, 1 },
	{ "copy_and_sum", "avx512", NULL, copy_sum_avx512, 1, 1 },
	{ "memcpy", "libc", NULL, copy_memcpy, 0, 0 },
};

static volatile uint32_t sink;

static double time_one(const struct kernel *k, uint8_t *dst, const uint8_t *src, size_t n, uint64_t reps)
{
	uint64_t t0 = now_ns();
	uint32_t s = sink;

	for (uint64_t i = 0; i < reps; i++) {
		if (k->sum)
			s = k->sum(src, n, s);
		else
			s = k->copy(dst, src, n, s);
		__asm__ volatile("" : "+r"(s) : : "memory");
	}
	sink = s;
	return (double)(now_ns() - t0) / (double)reps;
}

/* check compares k with the reference for length m, and its copy. */
static int check(const struct kernel *k, uint8_t *dst, const uint8_t *src, size_t m)
{
	uint32_t init = (uint32_t)(m * 2654435761u), want = ref_sum(src, m, fold16(init) & 0xffff), got;

	memset(dst, 0xa5, m + 64);
	got = k->sum ? k->sum(src, m, init) : k->copy(dst, src, m, init);
	got = fold16(got);
	if (got % 0xffff != want % 0xffff || (got == 0) != (want == 0)) {
		fprintf(stderr, "csumbench: %s %s: wrong sum at %zu bytes: %#x, want %#x\n", k->bench, k->impl, m, got,
			want);
		return 0;
	}
	if (k->copy && (memcmp(dst, src, m) != 0 || dst[m] != 0xa5)) {
		fprintf(stderr, "csumbench: %s %s: wrong copy at %zu bytes\n", k->bench, k->impl, m);
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	int ms = 100, rounds = 5, c, has512;
	double us = 0; /* -u: round length in microseconds, overrides -t */
	size_t sizes[32], nsizes = 0;
	const size_t nk = sizeof(kernels) / sizeof(kernels[0]);

	while ((c = getopt(argc, argv, "t:u:r:h")) != -1) {
		switch (c) {
		case 't': ms = atoi(optarg); break;
		case 'u': us = atof(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: csumbench [-t MS | -u US] [-r ROUNDS] [SIZE...]\n");
			return c == 'h' ? 0 : 1;
		}
	}
	for (; optind < argc && nsizes < 32; optind++)
		sizes[nsizes++] = strtoul(argv[optind], NULL, 10);
	if (nsizes == 0) {
		sizes[nsizes++] = 1500;
		sizes[nsizes++] = 65536;
	}
	if (ms < 1 || rounds < 1 || us < 0) {
		fprintf(stderr, "csumbench: -t, -u and -r must be positive\n");
		return 1;
	}
	if (us == 0)
		us = 1000.0 * ms;
	if (!__builtin_cpu_supports("avx2")) {
		fprintf(stderr, "csumbench: the CPU has no AVX2\n");
		return 1;
	}
	has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
	for (size_t k = 0; k < nsizes; k++) {
		size_t n = sizes[k];
		uint8_t *src = aligned_alloc(4096, n + 4096), *dst = aligned_alloc(4096, n + 4096);

		if (!src || !dst || n == 0 || n > (1 << 26)) {
			fprintf(stderr, "csumbench: bad size %zu\n", n);
			return 1;
		}
		for (size_t i = 0; i < n + 64; i++)
			src[i] = (uint8_t)(i * 7 + 3);
		for (size_t j = 0; j < nk; j++) {
			const struct kernel *kn = &kernels[j];
			uint64_t reps = 16;
			double best = -1;

			if (kn->avx512 && !has512)
				continue;
			if (kn->check) {
				for (size_t m = 0; m <= 300; m++)
					if (!check(kn, dst, src, m))
						return 1;
				for (size_t m = n > 97 ? n - 97 : 0; m <= n; m++)
					if (!check(kn, dst, src, m))
						return 1;
			}
			/* Calibrate the repetitions to about us per round. */
			while (time_one(kn, dst, src, n, reps) * (double)reps < 1e3 * us / 4)
				reps *= 2;
			reps *= 4;
			for (int r = 0; r < rounds; r++) {
				double t = time_one(kn, dst, src, n, reps);

				if (best < 0 || t < best)
					best = t;
			}
			printf("{\"bench\":\"%s\",\"impl\":\"%s\",\"size\":%zu,\"ns\":%.3f,\"gbps\":%.3f}\n", kn->bench,
			       kn->impl, n, best, (double)n / best);
		}
		free(src);
		free(dst);
	}
	return 0;
}
