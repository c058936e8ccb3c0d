//go:build ignore

// The line above keeps the go command from taking this file for a cgo
// source of package cbench (the harness builds it with gcc).

/*
 * wakebench: the C half of make bench's wake-up cost comparison.
 *
 * Usage: wakebench FIFO N
 *
 * Opens the named pipe FIFO (read-write, so that it never reads end of
 * file, and non-blocking), then reads until N bytes have come: it reads
 * until the pipe is empty and then sleeps in poll(2) until it is readable
 * again, the way xdpbench's receiver sleeps when idle (without its spins).
 * A waker on another CPU (bench/wakebench -m wake) writes one byte at a
 * time, paced. At the end it prints one JSON line on stdout:
 *   {"impl":"c","wakes":W,"bytes":N,"cpu_ns":C,"ctx_switches":S}
 * wakes counts the polls that found the pipe readable, cpu_ns is the process's CPU time (clock_gettime
 * CLOCK_PROCESS_CPUTIME_ID) from the first read to the last, ctx_switches
 * getrusage's voluntary and involuntary context switches meanwhile. It
 * prints "wakebench: ready" on stderr once the pipe is open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long long cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long switches(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: wakebench FIFO N\n");
		return 2;
	}
	char *end;
	long want = strtol(argv[2], &end, 10);
	if (*argv[2] == '\0' || *end != '\0' || want <= 0) {
		fprintf(stderr, "wakebench: count %s: want a positive number\n", argv[2]);
		return 2;
	}
	int fd = open(argv[1], O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		perror("wakebench: open");
		return 1;
	}
	fprintf(stderr, "wakebench: ready\n");
	char buf[4096];
	long got = 0, wakes = 0;
	long long c0 = cpu_ns();
	long s0 = switches();
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (got < want) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n > 0) {
			got += n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			perror("wakebench: read");
			return 1;
		}
		int r = poll(&p, 1, 1000);
		if (r < 0 && errno != EINTR) {
			perror("wakebench: poll");
			return 1;
		}
		if (r > 0)
			wakes++;
	}
	long long c = cpu_ns() - c0;
	printf("{\"impl\":\"c\",\"wakes\":%ld,\"bytes\":%ld,\"cpu_ns\":%lld,\"ctx_switches\":%ld}\n",
	       wakes, got, c, switches() - s0);
	return 0;
}
