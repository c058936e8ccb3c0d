//go:build ignore

// The line above keeps the go command from taking this file for a cgo
// source of package cbench (the harness builds it with gcc).

/*
 * ntbench: the C counterpart of nt's Copy benchmarks. A copy with
 * nontemporal AVX2 stores (_mm256_stream_si256 on the whole 64-byte lines
 * of the destination, memcpy for the partial lines at either end, one
 * SFENCE per 32 copies and at the end) against glibc's memcpy, into a hot
 * destination (one buffer written again and again) and into one that
 * cycles through a 64 MiB ring (every line cold), as nt's BenchmarkCopy
 * measures ("hot" and "ring").
 *
 * Output: one JSON line per (where, method, size):
 *   {"bench":"copy","where":"ring","impl":"nt-avx2","size":1500,"ns":N,"gbps":G}
 * ns is the best time per copy over -r rounds of about -t ms each.
 *
 * Build: gcc -O2 -mavx2 -o ntbench bench/c/ntbench.c
 * Run:   ntbench [-t MS] [-r ROUNDS] [SIZE...]   (default 1500 65536)
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define RING_BYTES (64UL << 20)
#define FENCE_EVERY 32

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* nt_copy copies n bytes; the whole 64-byte lines of dst with NT stores. */
static void nt_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
	size_t head = (64 - ((uintptr_t)dst & 63)) & 63;

	if (n < 256) { /* as nt.Copy: short copies are ordinary */
		memcpy(dst, src, n);
		return;
	}
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	for (; n >= 64; n -= 64, dst += 64, src += 64) {
		__m256i a = _mm256_loadu_si256((const __m256i *)src);
		__m256i b = _mm256_loadu_si256((const __m256i *)(src + 32));

		_mm256_stream_si256((__m256i *)dst, a);
		_mm256_stream_si256((__m256i *)(dst + 32), b);
	}
	memcpy(dst, src, n);
}

enum meth { M_MEMCPY, M_NT };
static const char *meth_names[] = { "memcpy", "nt-avx2" };

static uint8_t *ring;
static size_t ring_pos;

static double time_one(enum meth m, int cold, uint8_t *hot, const uint8_t *src, size_t n, uint64_t reps)
{
	size_t stride = (n + 63) & ~(size_t)63;
	uint64_t t0 = now_ns();

	for (uint64_t i = 0; i < reps; i++) {
		uint8_t *dst = hot;

		if (cold) {
			if (ring_pos + stride > RING_BYTES)
				ring_pos = 0;
			dst = ring + ring_pos;
			ring_pos += stride;
		}
		if (m == M_NT) {
			nt_copy(dst, src, n);
			if ((i + 1) % FENCE_EVERY == 0)
				_mm_sfence();
		} else {
			memcpy(dst, src, n);
			__asm__ volatile("" ::"r"(dst) : "memory");
		}
	}
	if (m == M_NT)
		_mm_sfence();
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
			fprintf(stderr, "usage: ntbench [-t MS] [-r ROUNDS] [SIZE...]\n");
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
		fprintf(stderr, "ntbench: -t and -r must be positive\n");
		return 1;
	}
	if (!__builtin_cpu_supports("avx2")) {
		fprintf(stderr, "ntbench: the CPU has no AVX2\n");
		return 1;
	}
	ring = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED) {
		perror("ntbench: mmap");
		return 1;
	}
	madvise(ring, RING_BYTES, MADV_HUGEPAGE);
	memset(ring, 1, RING_BYTES);
	for (size_t k = 0; k < nsizes; k++) {
		size_t n = sizes[k];
		uint8_t *src = aligned_alloc(64, n + 64), *hot = aligned_alloc(64, n + 64);

		if (!src || !hot || n == 0 || n > RING_BYTES / 4) {
			fprintf(stderr, "ntbench: bad size %zu\n", n);
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			src[i] = (uint8_t)(i * 7 + 3);
		nt_copy(hot + 1, src, n); /* check, at an unaligned destination */
		_mm_sfence();
		if (memcmp(hot + 1, src, n) != 0) {
			fprintf(stderr, "ntbench: nt_copy is wrong at %zu bytes\n", n);
			return 1;
		}
		for (int cold = 0; cold <= 1; cold++) {
			for (int m = M_MEMCPY; m <= M_NT; m++) {
				uint64_t reps = 16;
				double best = -1;

				while (time_one((enum meth)m, cold, hot, src, n, reps) * (double)reps < 1e6 * ms / 4)
					reps *= 2;
				reps *= 4;
				for (int r = 0; r < rounds; r++) {
					double t = time_one((enum meth)m, cold, hot, src, n, reps);

					if (best < 0 || t < best)
						best = t;
				}
				printf("{\"bench\":\"copy\",\"where\":\"%s\",\"impl\":\"%s\",\"size\":%zu,\"ns\":%.3f,\"gbps\":%.3f}\n",
				       cold ? "ring" : "hot", meth_names[m], n, best, (double)n / best);
			}
		}
		free(src);
		free(hot);
	}
	munmap(ring, RING_BYTES);
	return 0;
}
