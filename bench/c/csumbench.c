//go:build ignore

// The line above keeps the go command from taking this file for a cgo
// source of package cbench (the harness builds it with gcc).

/*
 * csumbench: the C counterpart of csum's Sum and CopyAndSum benchmarks
 * (issue 8). The Internet checksum (RFC 1071) of a hot buffer with AVX2,
 * the way a C data plane would write it: 32-byte loads, the 16-bit words
 * zero-extended to 32 bits and added into 32-bit lanes of four independent
 * accumulators (folded to 64 bits every 2048 loads, before any lane can
 * overflow), folded at the end; a fused copy-and-sum with the same loop
 * storing what it loads;
 * and memcpy for reference. Each result is checked against a byte-pair
 * reference before timing.
 *
 * Output: one JSON line per (function, size):
 *   {"bench":"sum","impl":"avx2","size":1500,"ns":N,"gbps":G}
 * ns is the best time per call over -r rounds of about -t ms each; gbps is
 * size / ns (GB/s, 10^9 bytes per second).
 *
 * Build: gcc -O2 -mavx2 -o csumbench bench/c/csumbench.c
 * Run:   csumbench [-t MS] [-r ROUNDS] [SIZE...]   (default 1500 65536)
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

/* ref_sum is the byte-pair reference: big-endian 16-bit words. */
static uint32_t ref_sum(const uint8_t *p, size_t n)
{
	uint64_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint32_t)s;
}

static uint32_t fold64(uint64_t s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint32_t)s;
}

/* hsum adds the eight 32-bit lanes of v into a 64-bit value. */
static uint64_t hsum(__m256i v)
{
	__m256i lo = _mm256_unpacklo_epi32(v, _mm256_setzero_si256());
	__m256i hi = _mm256_unpackhi_epi32(v, _mm256_setzero_si256());
	__m256i s = _mm256_add_epi64(lo, hi);
	__m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	return (uint64_t)_mm_cvtsi128_si64(t) + (uint64_t)_mm_extract_epi64(t, 1);
}

/* tail_le sums the last n < 64 bytes (little-endian words; swapped later). */
static uint64_t tail_le(const uint8_t *p, size_t n)
{
	uint64_t s = 0;
	size_t i = 0;

	for (; i + 1 < n; i += 2)
		s += (uint32_t)p[i] | (uint32_t)p[i + 1] << 8;
	if (n & 1)
		s += p[n - 1];
	return s;
}

static uint32_t swap16(uint32_t s) { return ((s & 0xff) << 8) | (s >> 8); }

/*
 * sum_avx2 sums little-endian 16-bit words: each 32-byte load is split into
 * its even and odd 16-bit halves zero-extended to 32 bits, each added into
 * the 32-bit lanes of its own accumulator. Folded to 64 bits every 1024
 * 64-byte blocks, so no lane overflows (1024 * 0xffff < 2^32). The byte swap at the end turns the
 * little-endian sum into the big-endian one (RFC 1071's byte-order
 * independence).
 */
static uint32_t sum_avx2(const uint8_t *p, size_t n)
{
	const __m256i mask = _mm256_set1_epi32(0xffff);
	uint64_t total = 0;

	while (n >= 64) {
		__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
		size_t blocks = n / 64 > 1024 ? 1024 : n / 64;

		for (size_t i = 0; i < blocks; i++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)p);
			__m256i w = _mm256_loadu_si256((const __m256i *)(p + 32));

			a0 = _mm256_add_epi32(a0, _mm256_and_si256(v, mask));
			a1 = _mm256_add_epi32(a1, _mm256_srli_epi32(v, 16));
			a2 = _mm256_add_epi32(a2, _mm256_and_si256(w, mask));
			a3 = _mm256_add_epi32(a3, _mm256_srli_epi32(w, 16));
			p += 64;
		}
		n -= blocks * 64;
		total += hsum(a0) + hsum(a1) + hsum(a2) + hsum(a3);
	}
	total += tail_le(p, n);
	return swap16(fold64(total));
}

/* copy_sum_avx2 is sum_avx2 that also stores what it loads into dst. */
static uint32_t copy_sum_avx2(uint8_t *dst, const uint8_t *p, size_t n)
{
	const __m256i mask = _mm256_set1_epi32(0xffff);
	uint64_t total = 0;

	while (n >= 64) {
		__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
		size_t blocks = n / 64 > 1024 ? 1024 : n / 64;

		for (size_t i = 0; i < blocks; i++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)p);
			__m256i w = _mm256_loadu_si256((const __m256i *)(p + 32));

			_mm256_storeu_si256((__m256i *)dst, v);
			_mm256_storeu_si256((__m256i *)(dst + 32), w);
			a0 = _mm256_add_epi32(a0, _mm256_and_si256(v, mask));
			a1 = _mm256_add_epi32(a1, _mm256_srli_epi32(v, 16));
			a2 = _mm256_add_epi32(a2, _mm256_and_si256(w, mask));
			a3 = _mm256_add_epi32(a3, _mm256_srli_epi32(w, 16));
			p += 64;
			dst += 64;
		}
		n -= blocks * 64;
		total += hsum(a0) + hsum(a1) + hsum(a2) + hsum(a3);
	}
	memcpy(dst, p, n);
	total += tail_le(p, n);
	return swap16(fold64(total));
}

static volatile uint32_t sink;

enum fn { F_SUM, F_COPYSUM, F_MEMCPY };
static const char *fn_names[] = { "sum", "copy_and_sum", "memcpy" };

static double time_one(enum fn f, uint8_t *dst, const uint8_t *src, size_t n, uint64_t reps)
{
	uint64_t t0 = now_ns();
	uint32_t s = 0;

	for (uint64_t i = 0; i < reps; i++) {
		switch (f) {
		case F_SUM: s += sum_avx2(src, n); break;
		case F_COPYSUM: s += copy_sum_avx2(dst, src, n); break;
		case F_MEMCPY: memcpy(dst, src, n); __asm__ volatile("" ::"r"(dst) : "memory"); break;
		}
	}
	sink = s;
	return (double)(now_ns() - t0) / (double)reps;
}

int main(int argc, char **argv)
{
	int ms = 100, rounds = 5, c;
	size_t sizes[16], nsizes = 0;

	while ((c = getopt(argc, argv, "t:r:h")) != -1) {
		switch (c) {
		case 't': ms = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: csumbench [-t MS] [-r ROUNDS] [SIZE...]\n");
			return c == 'h' ? 0 : 1;
		}
	}
	for (; optind < argc && nsizes < 16; optind++)
		sizes[nsizes++] = strtoul(argv[optind], NULL, 10);
	if (nsizes == 0) {
		sizes[nsizes++] = 1500;
		sizes[nsizes++] = 65536;
	}
	if (ms < 1 || rounds < 1) {
		fprintf(stderr, "csumbench: -t and -r must be positive\n");
		return 1;
	}
	if (!__builtin_cpu_supports("avx2")) {
		fprintf(stderr, "csumbench: the CPU has no AVX2\n");
		return 1;
	}
	for (size_t k = 0; k < nsizes; k++) {
		size_t n = sizes[k];
		uint8_t *src = aligned_alloc(64, n + 64), *dst = aligned_alloc(64, n + 64);

		if (!src || !dst || n == 0 || n > (1 << 26)) {
			fprintf(stderr, "csumbench: bad size %zu\n", n);
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			src[i] = (uint8_t)(i * 7 + 3);
		/* Check against the reference, at odd lengths too. */
		for (size_t m = n > 97 ? n - 97 : 0; m <= n; m++) {
			uint32_t a = sum_avx2(src, m), b = ref_sum(src, m), d = copy_sum_avx2(dst, src, m);

			if ((a % 0xffff) != (b % 0xffff) || d != a || memcmp(dst, src, m) != 0) {
				fprintf(stderr, "csumbench: wrong sum at %zu bytes: %#x, want %#x\n", m, a, b);
				return 1;
			}
		}
		for (int f = F_SUM; f <= F_MEMCPY; f++) {
			/* Calibrate the repetitions to about ms per round. */
			uint64_t reps = 16;
			double best = -1;

			while (time_one((enum fn)f, dst, src, n, reps) * (double)reps < 1e6 * ms / 4)
				reps *= 2;
			reps *= 4;
			for (int r = 0; r < rounds; r++) {
				double t = time_one((enum fn)f, dst, src, n, reps);

				if (best < 0 || t < best)
					best = t;
			}
			printf("{\"bench\":\"%s\",\"impl\":\"%s\",\"size\":%zu,\"ns\":%.3f,\"gbps\":%.3f}\n",
			       fn_names[f], f == F_MEMCPY ? "libc" : "avx2", n, best, (double)n / best);
		}
		free(src);
		free(dst);
	}
	return 0;
}
