//go:build ignore

// The line above keeps the go command from taking this file for a cgo
// source of package cbench (build.sh builds it with gcc instead).

/*
 * xsksample: the AF_XDP sample program shape that users know, as a
 * reference for xdpkit's benchmarks.
 *
 * What it is
 *   A program of our own that follows the modes, command line, defaults,
 *   loops and statistics output of xdpsock, the AF_XDP sample of the
 *   Linux kernel and of xdp-project/bpf-examples (AF_XDP-example). It is
 *   not xdpsock and shares no code with it: it keeps the one-socket
 *   subset that people benchmark with, built on libxdp's <xdp/xsk.h> and
 *   libbpf, as xdpsock is. Its rows in make bench show what a C user's
 *   own comparison gives; xdpbench.c is the C reference that mirrors
 *   xdpkit's own strategies.
 *
 * Modes
 *   -r rxdrop  one socket on -i/-q; every frame goes back to the Fill
 *              ring at once, unread. When the RX ring is empty and the
 *              kernel set need_wakeup on the Fill ring, recvfrom() wakes
 *              the driver.
 *   -t txonly  UDP/IPv4 frames of -s bytes counting the 4-byte FCS (so
 *              the frame in the ring is 4 bytes shorter, as xdpsock's),
 *              written once into every UMEM frame before the run; batches
 *              of -b descriptors; completions reaped after each batch;
 *              sendto() kicks only when the TX ring has need_wakeup set
 *              (every time with -m).
 *   -l l2fwd   receive, swap the Ethernet source and destination, send
 *              back on the same socket (a hairpin), return completed TX
 *              frames to the Fill ring. In copy mode (-c) every loop with
 *              frames in flight kicks TX with sendto(), as the copy mode
 *              TX path needs a system call to run.
 *
 * Defaults (xdpsock's)
 *   4096 UMEM frames of 4096 bytes, no headroom; Fill ring 4096 entries
 *   (filled completely at start in rxdrop and l2fwd), Completion, RX and
 *   TX rings 2048; batch 64; need_wakeup on; native XDP (-N) unless -S;
 *   a busy loop unless -p (poll(2) with a 1 s timeout before each round);
 *   statistics every -n seconds (1) from a second thread; -d seconds of
 *   running (0: until SIGINT/SIGTERM), checked by that thread, so the run
 *   ends on a statistics interval. One socket; libxdp loads and removes
 *   its own redirect program.
 *
 * What differs from xdpsock
 *   Only the options above (plus -z, -m, -G, -H, -h); no multi-buffer,
 *   VLAN, timestamps, busy-poll sockets, several sockets or packet
 *   counts. The txonly frames go from 198.18.0.1 to 198.18.0.2, UDP port
 *   4096 to 4096, from and to locally administered MACs unless -H and -G
 *   say others. A refused RLIMIT_MEMLOCK raise is a warning, not
 *   an exit (the kernel charges AF_XDP and BPF memory to the memory
 *   cgroup).
 *
 * Output
 *   Every interval, and once more at exit, xdpsock's statistics block:
 *
 *    sock0@veth1:0 rxdrop xdp-drv
 *                      pps            pkts           1.00
 *   rx                 512,000        1,012,000
 *   tx                 0              0
 *
 *   (pkts cumulative; the digits grouped by the locale). Errors go to
 *   stderr and the exit code is 1.
 *
 * Build and run (Debian: libxdp-dev libbpf-dev)
 *   OUT=/tmp/xsksample sh bench/c/build.sh xsksample
 *   ip netns exec B xsksample -l -i vethB -q 0 -N -c -d 5
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <net/ethernet.h>
#include <netinet/ether.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#define FRAMES 4096
#define FRAME_SIZE XSK_UMEM__DEFAULT_FRAME_SIZE
#define FILL_SIZE (XSK_RING_PROD__DEFAULT_NUM_DESCS * 2)
#define FCS 4
#define POLL_TIMEOUT_MS 1000

enum mode { RXDROP, TXONLY, L2FWD };

static const char *mode_name[] = { "rxdrop", "txonly", "l2fwd" };

/* The command line. */
static enum mode mode = RXDROP;
static const char *ifname = "";
static int queue;
static bool skb_mode;
static uint16_t bind_flags = XDP_USE_NEED_WAKEUP;
static bool need_wakeup = true;
static bool use_poll;
static unsigned int batch = 64;
static unsigned int frame_len = 64; /* -s: with the FCS */
static int interval = 1;
static unsigned long duration_ns;
static struct ether_addr tx_dst = { { 0x02, 0, 0, 0, 0, 0x02 } };
static struct ether_addr tx_src = { { 0x02, 0, 0, 0, 0, 0x01 } };

/* One socket and its UMEM. The counters are written by the loop and read
 * by the statistics thread. */
struct sock {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fq, tx;
	struct xsk_ring_cons cq, rx;
	void *area;
	uint32_t in_flight; /* TX descriptors not yet completed */
	_Atomic uint64_t rx_pkts, tx_pkts;
};

static struct sock s;
static atomic_bool done;
static uint64_t started_ns, last_ns, last_rx, last_tx;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "xsksample: %s: %s\n", what, strerror(err));
	exit(1);
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&done, true);
}

static void add(_Atomic uint64_t *c, uint64_t n)
{
	/* One writer: a relaxed load and store, no locked instruction. */
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* print_stats writes one statistics block, rates since the last one. */
static void print_stats(void)
{
	uint64_t t = now_ns();
	double dt = (double)(t - last_ns) / 1e9;
	uint64_t rx = atomic_load_explicit(&s.rx_pkts, memory_order_relaxed);
	uint64_t tx = atomic_load_explicit(&s.tx_pkts, memory_order_relaxed);

	if (dt <= 0)
		dt = 1e-9;
	printf("\n sock0@%s:%d %s %s %s\n", ifname, queue, mode_name[mode],
	       skb_mode ? "xdp-skb" : "xdp-drv", use_poll ? "poll() " : "");
	printf("%-18s %-14s %-14s %-14.2f\n", "", "pps", "pkts", dt);
	printf("%-18s %'-14.0f %'-14lu\n", "rx", (double)(rx - last_rx) / dt, (unsigned long)rx);
	printf("%-18s %'-14.0f %'-14lu\n", "tx", (double)(tx - last_tx) / dt, (unsigned long)tx);
	fflush(stdout);
	last_ns = t;
	last_rx = rx;
	last_tx = tx;
}

/* stats_thread prints every interval and ends the run after -d. */
static void *stats_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&done)) {
		sleep((unsigned int)interval);
		print_stats();
		if (duration_ns && now_ns() - started_ns >= duration_ns)
			atomic_store(&done, true);
	}
	return NULL;
}

/* kick asks the kernel to run TX; a busy or full device is not an error:
 * the next round kicks again. */
static void kick(void)
{
	if (sendto(xsk_socket__fd(s.xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
		return;
	if (errno == ENOBUFS || errno == EAGAIN || errno == EBUSY || errno == ENETDOWN)
		return;
	die("sendto", errno);
}

/* wake_rx lets the driver refill from the Fill ring when it asks. */
static void wake_rx(void)
{
	if (xsk_ring_prod__needs_wakeup(&s.fq))
		recvfrom(xsk_socket__fd(s.xsk), NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

/* reserve_fill waits for n free Fill ring entries (they come back as the
 * driver takes frames). */
static uint32_t reserve_fill(uint32_t n)
{
	uint32_t idx;

	while (xsk_ring_prod__reserve(&s.fq, n, &idx) != n)
		wake_rx();
	return idx;
}

static void rxdrop_round(void)
{
	uint32_t rx_idx = 0, fq_idx, n, i;

	n = xsk_ring_cons__peek(&s.rx, batch, &rx_idx);
	if (!n) {
		wake_rx();
		return;
	}
	fq_idx = reserve_fill(n);
	for (i = 0; i < n; i++) {
		uint64_t addr = xsk_ring_cons__rx_desc(&s.rx, rx_idx + i)->addr;

		*xsk_ring_prod__fill_addr(&s.fq, fq_idx + i) = xsk_umem__extract_addr(addr);
	}
	xsk_ring_prod__submit(&s.fq, n);
	xsk_ring_cons__release(&s.rx, n);
	add(&s.rx_pkts, n);
}

/* txonly_reap kicks when the kernel asks and takes up to max completions. */
static void txonly_reap(uint32_t max)
{
	uint32_t idx, n;

	if (!s.in_flight)
		return;
	if (!need_wakeup || xsk_ring_prod__needs_wakeup(&s.tx))
		kick();
	n = xsk_ring_cons__peek(&s.cq, max, &idx);
	if (n) {
		xsk_ring_cons__release(&s.cq, n);
		s.in_flight -= n;
	}
}

static void txonly_round(uint32_t *next_frame)
{
	uint32_t idx = 0, i, len = frame_len - FCS;

	while (xsk_ring_prod__reserve(&s.tx, batch, &idx) < batch) {
		txonly_reap(batch);
		if (atomic_load_explicit(&done, memory_order_relaxed))
			return;
	}
	for (i = 0; i < batch; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&s.tx, idx + i);

		d->addr = (uint64_t)*next_frame * FRAME_SIZE;
		d->len = len;
		d->options = 0;
		*next_frame = (*next_frame + 1) % FRAMES;
	}
	xsk_ring_prod__submit(&s.tx, batch);
	s.in_flight += batch;
	add(&s.tx_pkts, batch);
	txonly_reap(batch);
}

/* l2fwd_reap returns up to a batch of completed TX frames to the Fill
 * ring; in copy mode it kicks first, whenever frames are in flight. */
static void l2fwd_reap(void)
{
	uint32_t cq_idx = 0, fq_idx, n, i;

	if (!s.in_flight)
		return;
	if (bind_flags & XDP_COPY)
		kick();
	n = xsk_ring_cons__peek(&s.cq, s.in_flight < batch ? s.in_flight : batch, &cq_idx);
	if (!n)
		return;
	fq_idx = reserve_fill(n);
	for (i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&s.fq, fq_idx + i) = *xsk_ring_cons__comp_addr(&s.cq, cq_idx + i);
	xsk_ring_prod__submit(&s.fq, n);
	xsk_ring_cons__release(&s.cq, n);
	s.in_flight -= n;
}

static void swap_macs(uint8_t *frame)
{
	uint8_t t[ETH_ALEN];

	memcpy(t, frame, ETH_ALEN);
	memcpy(frame, frame + ETH_ALEN, ETH_ALEN);
	memcpy(frame + ETH_ALEN, t, ETH_ALEN);
}

static void l2fwd_round(void)
{
	uint32_t rx_idx = 0, tx_idx = 0, n, i;

	l2fwd_reap();
	n = xsk_ring_cons__peek(&s.rx, batch, &rx_idx);
	if (!n) {
		wake_rx();
		return;
	}
	while (xsk_ring_prod__reserve(&s.tx, n, &tx_idx) != n) {
		/* A TX ring that stops draining (link down) must not hold
		 * off a signal: the peeked RX descriptors stay at exit. */
		if (atomic_load_explicit(&done, memory_order_relaxed))
			return;
		l2fwd_reap();
		if (!need_wakeup || xsk_ring_prod__needs_wakeup(&s.tx))
			kick();
	}
	for (i = 0; i < n; i++) {
		const struct xdp_desc *in = xsk_ring_cons__rx_desc(&s.rx, rx_idx + i);
		struct xdp_desc *out = xsk_ring_prod__tx_desc(&s.tx, tx_idx + i);

		swap_macs(xsk_umem__get_data(s.area, xsk_umem__add_offset_to_addr(in->addr)));
		out->addr = in->addr;
		out->len = in->len;
		out->options = 0;
	}
	xsk_ring_prod__submit(&s.tx, n);
	xsk_ring_cons__release(&s.rx, n);
	s.in_flight += n;
	add(&s.rx_pkts, n);
	add(&s.tx_pkts, n);
}

/* csum_add sums 16-bit big-endian words into a one's complement sum. */
static uint32_t csum_add(uint32_t sum, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (; n > 1; n -= 2, b += 2)
		sum += (uint32_t)b[0] << 8 | b[1];
	if (n)
		sum += (uint32_t)b[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* write_frames puts one UDP/IPv4 frame of frame_len - FCS bytes, valid
 * checksums and a repeated 32-bit payload pattern, into every UMEM frame. */
static void write_frames(void)
{
	uint8_t f[FRAME_SIZE] = { 0 };
	uint32_t len = frame_len - FCS, i, sum;
	struct ether_header *eth = (struct ether_header *)f;
	struct iphdr *ip = (struct iphdr *)(eth + 1);
	struct udphdr *udp = (struct udphdr *)(ip + 1);
	uint16_t ip_len = (uint16_t)(len - sizeof(*eth)), udp_len = (uint16_t)(ip_len - sizeof(*ip));
	uint8_t pseudo[4];

	memcpy(eth->ether_dhost, &tx_dst, ETH_ALEN);
	memcpy(eth->ether_shost, &tx_src, ETH_ALEN);
	eth->ether_type = htons(ETHERTYPE_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = htons(ip_len);
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->saddr = htonl(0xc6120001); /* 198.18.0.1 */
	ip->daddr = htonl(0xc6120002); /* 198.18.0.2 */
	ip->check = csum_fold(csum_add(0, ip, sizeof(*ip)));
	udp->source = htons(0x1000);
	udp->dest = htons(0x1000);
	udp->len = htons(udp_len);
	for (i = sizeof(*eth) + sizeof(*ip) + sizeof(*udp); i < len; i++)
		f[i] = (uint8_t)(0x12345678u >> (24 - 8 * (i % 4)));
	pseudo[0] = 0;
	pseudo[1] = IPPROTO_UDP;
	pseudo[2] = (uint8_t)(udp_len >> 8);
	pseudo[3] = (uint8_t)udp_len;
	sum = csum_add(0, &ip->saddr, 8);
	sum = csum_add(sum, pseudo, sizeof(pseudo));
	sum = csum_add(sum, udp, udp_len);
	udp->check = csum_fold(sum);
	if (!udp->check)
		udp->check = 0xffff;
	for (i = 0; i < FRAMES; i++)
		memcpy((uint8_t *)s.area + (size_t)i * FRAME_SIZE, f, len);
}

static void usage(int code)
{
	fprintf(code ? stderr : stdout,
		"usage: xsksample -r|-t|-l -i IFNAME [options]\n"
		"  -r, --rxdrop          drop every received frame (default)\n"
		"  -t, --txonly          send UDP/IPv4 frames\n"
		"  -l, --l2fwd           swap MACs, send back on the same socket\n"
		"  -i, --interface=N     the interface\n"
		"  -q, --queue=N         its queue (0)\n"
		"  -N, --xdp-native      native (driver) XDP (default)\n"
		"  -S, --xdp-skb         generic (skb) XDP\n"
		"  -c, --copy            copy mode\n"
		"  -z, --zero-copy       zero-copy mode\n"
		"  -m, --no-need-wakeup  kick without waiting for the kernel to ask\n"
		"  -p, --poll            poll(2) before each round\n"
		"  -b, --batch-size=N    descriptors per round (64)\n"
		"  -s, --tx-pkt-size=N   txonly frame size with the 4-byte FCS, %d..%d (64)\n"
		"  -G, --tx-dmac=MAC     txonly destination MAC (02:00:00:00:00:02)\n"
		"  -H, --tx-smac=MAC     txonly source MAC (02:00:00:00:00:01)\n"
		"  -n, --interval=N      seconds between statistics (1)\n"
		"  -d, --duration=N      seconds to run (0: until SIGINT)\n",
		ETH_ZLEN + FCS, FRAME_SIZE);
	exit(code);
}

static long number(const char *opt, const char *arg, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || *end || end == arg || v < lo || v > hi) {
		fprintf(stderr, "xsksample: %s %s: want an integer in %ld..%ld\n", opt, arg, lo, hi);
		exit(1);
	}
	return v;
}

static void parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rxdrop", no_argument, NULL, 'r' },
		{ "txonly", no_argument, NULL, 't' },
		{ "l2fwd", no_argument, NULL, 'l' },
		{ "interface", required_argument, NULL, 'i' },
		{ "queue", required_argument, NULL, 'q' },
		{ "xdp-native", no_argument, NULL, 'N' },
		{ "xdp-skb", no_argument, NULL, 'S' },
		{ "copy", no_argument, NULL, 'c' },
		{ "zero-copy", no_argument, NULL, 'z' },
		{ "no-need-wakeup", no_argument, NULL, 'm' },
		{ "poll", no_argument, NULL, 'p' },
		{ "batch-size", required_argument, NULL, 'b' },
		{ "tx-pkt-size", required_argument, NULL, 's' },
		{ "tx-dmac", required_argument, NULL, 'G' },
		{ "tx-smac", required_argument, NULL, 'H' },
		{ "interval", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "rtli:q:NSczmpb:s:G:H:n:d:h", opts, NULL)) != -1) {
		switch (c) {
		case 'r': mode = RXDROP; break;
		case 't': mode = TXONLY; break;
		case 'l': mode = L2FWD; break;
		case 'i': ifname = optarg; break;
		case 'q': queue = (int)number("-q", optarg, 0, 4095); break;
		case 'N': skb_mode = false; break;
		case 'S': skb_mode = true; break;
		case 'c': bind_flags |= XDP_COPY; break;
		case 'z': bind_flags |= XDP_ZEROCOPY; break;
		case 'm':
			need_wakeup = false;
			bind_flags &= (uint16_t)~XDP_USE_NEED_WAKEUP;
			break;
		case 'p': use_poll = true; break;
		case 'b': batch = (unsigned int)number("-b", optarg, 1, XSK_RING_PROD__DEFAULT_NUM_DESCS); break;
		case 's': frame_len = (unsigned int)number("-s", optarg, ETH_ZLEN + FCS, FRAME_SIZE); break;
		case 'G':
		case 'H':
			if (!ether_aton_r(optarg, c == 'G' ? &tx_dst : &tx_src)) {
				fprintf(stderr, "xsksample: -%c %s: not a MAC address\n", c, optarg);
				exit(1);
			}
			break;
		case 'n': interval = (int)number("-n", optarg, 1, 3600); break;
		case 'd': duration_ns = (unsigned long)number("-d", optarg, 0, 86400) * 1000000000ul; break;
		case 'h': usage(0); break;
		default: usage(1);
		}
	}
	if (optind < argc || !*ifname)
		usage(1);
	if ((bind_flags & XDP_COPY) && (bind_flags & XDP_ZEROCOPY)) {
		fprintf(stderr, "xsksample: -c and -z exclude each other\n");
		exit(1);
	}
}

static void setup(void)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct xsk_umem_config ucfg = {
		.fill_size = FILL_SIZE,
		.comp_size = XSK_RING_CONS__DEFAULT_NUM_DESCS,
		.frame_size = FRAME_SIZE,
		.frame_headroom = XSK_UMEM__DEFAULT_FRAME_HEADROOM,
	};
	struct xsk_socket_config scfg = {
		.rx_size = XSK_RING_CONS__DEFAULT_NUM_DESCS,
		.tx_size = XSK_RING_PROD__DEFAULT_NUM_DESCS,
		.xdp_flags = skb_mode ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE,
		.bind_flags = bind_flags,
	};
	size_t size = (size_t)FRAMES * FRAME_SIZE;
	bool rx = mode != TXONLY, tx = mode != RXDROP;
	uint32_t idx, i;
	int err;

	if (setrlimit(RLIMIT_MEMLOCK, &unlimited))
		fprintf(stderr, "xsksample: setrlimit(RLIMIT_MEMLOCK): %s; going on\n", strerror(errno));
	s.area = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s.area == MAP_FAILED)
		die("mmap", errno);
	if ((err = xsk_umem__create(&s.umem, s.area, size, &s.fq, &s.cq, &ucfg)))
		die("xsk_umem__create", -err);
	if (rx) {
		if (xsk_ring_prod__reserve(&s.fq, FILL_SIZE, &idx) != FILL_SIZE)
			die("Fill ring", ENOSPC);
		for (i = 0; i < FILL_SIZE; i++)
			*xsk_ring_prod__fill_addr(&s.fq, idx + i) = (uint64_t)i * FRAME_SIZE;
		xsk_ring_prod__submit(&s.fq, FILL_SIZE);
	}
	if ((err = xsk_socket__create(&s.xsk, ifname, (uint32_t)queue, s.umem, rx ? &s.rx : NULL,
				      tx ? &s.tx : NULL, &scfg)))
		die("xsk_socket__create", -err);
	if (mode == TXONLY)
		write_frames();
}

int main(int argc, char **argv)
{
	struct pollfd pfd = { 0 };
	pthread_t stats;
	uint32_t next_frame = 0;
	int err;

	parse(argc, argv);
	setup();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setlocale(LC_ALL, "");
	started_ns = last_ns = now_ns();
	if ((err = pthread_create(&stats, NULL, stats_thread, NULL)))
		die("pthread_create", err);

	pfd.fd = xsk_socket__fd(s.xsk);
	pfd.events = mode == RXDROP ? POLLIN : mode == TXONLY ? POLLOUT : POLLIN | POLLOUT;
	while (!atomic_load_explicit(&done, memory_order_relaxed)) {
		if (use_poll) {
			int n = poll(&pfd, 1, POLL_TIMEOUT_MS);

			if (n < 0 && errno != EINTR)
				die("poll", errno);
			if (n <= 0 || (mode == TXONLY && !(pfd.revents & POLLOUT)))
				continue;
		}
		switch (mode) {
		case RXDROP: rxdrop_round(); break;
		case TXONLY: txonly_round(&next_frame); break;
		case L2FWD: l2fwd_round(); break;
		}
	}

	pthread_join(stats, NULL);
	print_stats();
	xsk_socket__delete(s.xsk);
	xsk_umem__delete(s.umem);
	munmap(s.area, (size_t)FRAMES * FRAME_SIZE);
	return 0;
}
