//go:build ignore

// The line above keeps the go command from taking this file for a cgo
// source of package cbench (the tests build it with gcc instead).

/*
 * xdpbench: the C reference for xdpkit's AF_XDP benchmarks.
 *
 * What it does
 *   One plain C program, written against the Linux uapi headers only
 *   (<linux/if_xdp.h>, <linux/bpf.h>, <linux/if_link.h>): no libbpf, no
 *   libxdp. AF_XDP sockets are driven with raw socket/setsockopt/mmap/bind/
 *   sendto/recvfrom/poll calls; the XSKMAP and the XDP programs (written
 *   here as raw eBPF instructions) are created with the bpf(2) system call
 *   and attached with BPF_LINK_CREATE, so they go away when the process
 *   exits, however it exits.
 *
 *   Modes (-m):
 *     txonly  AF_XDP transmit of UDP/IPv4 frames of -s bytes (Ethernet
 *             header included, FCS excluded) in batches of -b. Every UMEM
 *             frame holds the same packet, written once before the run
 *             (but for the stamp, under --stamp).
 *             Completions are reaped in one batch per loop; sendto() kicks
 *             only when the TX ring holds unconsumed descriptors and the
 *             kernel set XDP_RING_NEED_WAKEUP on it (the ring stays as full
 *             as the free frames allow). --drain uses xdpkit txpath.Sender's
 *             strategy instead: after each batch, kick until the kernel took
 *             it (bounded, reaping in between). --rate PPS paces the sender
 *             to PPS frames per second (sleeping when ahead), for fixed
 *             offered loads; --busy polls the clock instead of sleeping,
 *             so that frames leave on time, in batches of one while the
 *             sender keeps up. --stamp writes the magic and stamp of
 *             xdpgen -timestamp's payload ("XKT1", the send time in
 *             CLOCK_TAI ns 16 bytes further; the rest of the payload is
 *             not xdpgen's; the UDP checksum updated) into every frame of a
 *             batch just before it is submitted: what an rxdrop --latency
 *             receiver then measures excludes the sender's own queue,
 *             but for the frames ahead in the same batch.
 *     gen     the same as txonly (kept as a name for "traffic generator").
 *             The frames are valid UDP/IPv4 with correct IPv4 and UDP
 *             checksums, so the peer may be a normal kernel stack (use its
 *             MAC and address for --dst-mac/--dst-ip) or an rxdrop/sink.
 *     sink    attaches an XDP_DROP program to -i and waits -d seconds (or
 *             until -n packets arrived); prints the interface's received
 *             packet count from /proc/self/net/dev.
 *     rxdrop  attaches a program redirecting by rx_queue_index into an
 *             XSKMAP (XDP_PASS when the queue has no socket), one AF_XDP
 *             socket on queue -q; the fill ring is kept full, RX is read in
 *             batches of -b and the frames go back to the fill ring at once.
 *             Packet data is not read.
 *     fwd     receives on -i (redirect program, socket owning the UMEM),
 *             rewrites the Ethernet addresses (destination --dst-mac,
 *             source the MAC of -o) in place, transmits on -o through a
 *             second socket bound with XDP_SHARED_UMEM to the first socket's
 *             fd (no copy), and returns completed frames to the fill ring.
 *             --l3 routes as well, doing what xdpkit's forwarding path
 *             (pkt.Parse, pkt.DecTTL, pkt.SetMACs) does: parse Ethernet
 *             (up to two VLAN tags), IPv4 or IPv6 and the UDP/TCP header,
 *             drop what is malformed, not IP or whose TTL/hop limit would
 *             expire, decrement the TTL with the IPv4 header checksum
 *             updated incrementally (RFC 1624), then the MAC rewrite;
 *             --dst-mac is the (resolved) next hop.
 *             With -o equal to -i and --out-queue equal to -q it is a
 *             hairpin: ONE socket on that queue, with RX and TX rings,
 *             sends each frame back out of the link it came in on, the
 *             frame going from the RX ring to the TX ring of the same
 *             socket (no copy, no second socket); the rewrite is the same
 *             (destination --dst-mac, source the link's own MAC: with
 *             the sender's MAC as --dst-mac, the addresses swapped).
 *
 *   The loop busy-polls while traffic flows and falls back to poll(2)
 *   (1 ms timeout) after 64 idle rounds; rxdrop --spin never sleeps.
 *
 *   rxdrop --latency reads the send time that xdpgen -timestamp (or
 *   txonly --stamp) writes into each UDP/IPv4 payload (magic "XKT1"
 *   after the 16-byte header's first 4 bytes, then big-endian CLOCK_TAI
 *   ns after the header) and
 *   keeps a histogram of the one-way delay to CLOCK_TAI taken once per
 *   received batch, when the loop sees the packets (log-linear buckets,
 *   64 per power of two: under 1.6% error; no allocation per packet). The
 *   JSON line adds "lat_samples", "lat_negative" (receive time before the
 *   send time: left out), "lat_p50_ns", "lat_p99_ns", "lat_p999_ns",
 *   "lat_max_ns", "cpu_ns" (the process's CPU time, CLOCK_PROCESS_CPUTIME_ID,
 *   over the run) and "lat_deciles_ns" (p10 to p90). At the end it prints one JSON line
 *   on stdout, e.g.
 *     {"mode":"txonly","frames":N,"seconds":S,"mpps":X,...}
 *   (rxdrop and fwd add "wakeups": the polls that found the socket ready,
 *   as xdpkitbench reports the rxpath.Poller's, and "kicks_again": the
 *   kicks the kernel answered EAGAIN, EBUSY or ENOBUFS) and, once set up, the line
 *   "xdpbench: ready" on stderr (so a harness
 *   can start the peer). Errors go to stderr and the exit code is 1.
 *   rxdrop and fwd measure their rate between the first and the last
 *   packet received; txonly from its start to its last completion.
 *
 * Kernel
 *   Linux 5.10 or newer (BPF_LINK_CREATE for XDP: 5.9; a UMEM shared
 *   between devices: 5.10; XDP_RING_NEED_WAKEUP: 5.4);
 *   --tx-budget (XDP_MAX_TX_SKB_BUDGET) needs 6.15. Run as root (CAP_NET_ADMIN,
 *   CAP_NET_RAW, CAP_BPF/CAP_SYS_ADMIN, CAP_IPC_LOCK for the UMEM).
 *
 * Build and run
 *   OUT=/tmp/xdpbench sh bench/c/build.sh      (gcc -O2 -Wall -Wextra)
 *   ip netns exec B xdpbench -m sink -i vethB -d 6 &
 *   ip netns exec A xdpbench -m txonly -i vethA -q 0 -s 64 -b 64 -d 5 \
 *       --dst-mac 02:00:00:00:00:02 --src-ip 198.18.0.1 --dst-ip 198.18.0.2
 *   ip netns exec B xdpbench -m rxdrop -i vethB -q 0 -d 6
 *   ip netns exec B xdpbench -m fwd -i vethB -o vethC -d 6 --dst-mac MAC_OF_D
 *   xdpbench -h lists every flag and its default.
 *
 * Defaults match xdpkit's: rings of 2048 entries, batch 64, 4096 frames of
 * 4096 bytes, copy mode, need_wakeup on, native (driver) XDP attach.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>

/* Constants newer than some distributions' uapi headers (Debian 12 ships
 * 6.1's). */
#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef XDP_MAX_TX_SKB_BUDGET
#define XDP_MAX_TX_SKB_BUDGET 9 /* Linux 6.15 */
#endif
#ifndef XDP_USE_NEED_WAKEUP
#define XDP_USE_NEED_WAKEUP (1 << 3)
#endif
#ifndef XDP_RING_NEED_WAKEUP
#define XDP_RING_NEED_WAKEUP (1 << 0)
#endif

#define IDLE_SPINS 64          /* empty rounds before poll(2) */
#define POLL_TIMEOUT_MS 1      /* poll(2) timeout when idle */
#define DRAIN_NS 200000000ULL  /* how long to wait for the last completions */
#define BIND_RETRIES 50        /* bind EBUSY retries, 10 ms apart */
#define XSKMAP_ENTRIES 64      /* queues that can take a socket */
#define MAX_DURATION 3600      /* -d bound, seconds */
#define ETH_HLEN_ 14
#define IP_HLEN_ 20
#define UDP_HLEN_ 8
#define MIN_FRAME (ETH_HLEN_ + IP_HLEN_ + UDP_HLEN_)

/* xdpgen -timestamp's payload (apps/internal/payload): the magic "XKT1"
 * at the start of the UDP payload, the send time (CLOCK_TAI ns,
 * big-endian) 16 bytes further. */
#define STAMP_OFF (ETH_HLEN_ + IP_HLEN_ + UDP_HLEN_)
#define STAMP_END (STAMP_OFF + 16 + 8)

enum mode { M_TXONLY, M_GEN, M_SINK, M_RXDROP, M_FWD };
static const char *const mode_names[] = { "txonly", "gen", "sink", "rxdrop", "fwd" };

/* ---- options ---------------------------------------------------------- */

static struct opts {
	enum mode mode;
	const char *ifname, *out_ifname;
	uint32_t queue, out_queue;
	uint32_t size;       /* Ethernet frame bytes, headers included */
	uint32_t batch;
	uint32_t duration;   /* seconds */
	uint64_t count;      /* 0: no limit */
	uint32_t frame_size; /* UMEM chunk */
	uint32_t nframes;
	uint32_t ring;       /* every ring's size */
	int cpu;             /* -1: no pinning */
	bool generic;        /* XDP_FLAGS_SKB_MODE instead of DRV_MODE */
	bool zerocopy;
	bool no_wakeup;
	uint32_t tx_budget;  /* 0: leave the kernel's default */
	uint64_t rate;       /* txonly: frames per second, 0: as fast as possible */
	bool drain;          /* txonly: txpath.Sender's strategy (kick until each batch is taken) */
	bool stamp;          /* txonly: xdpgen -timestamp's magic and stamp, stamped as each batch is submitted */
	bool busy;           /* txonly --rate: wait for the next frame's time by reading the clock */
	bool latency;        /* rxdrop: one-way delay from xdpgen -timestamp's (or --stamp's) stamps */
	bool spin;           /* rxdrop: never sleep in poll(2) */
	bool l3;             /* fwd: route (TTL decrement, checksum update) before the MAC rewrite */
	bool have_src_mac, have_dst_mac;
	uint8_t src_mac[6], dst_mac[6];
	uint32_t src_ip, dst_ip; /* network order */
	uint16_t src_port, dst_port;
} o = {
	.mode = M_TXONLY,
	.size = 64,
	.batch = 64,
	.duration = 5,
	.frame_size = 4096,
	.nframes = 4096,
	.ring = 2048,
	.cpu = -1,
	.src_port = 12345,
	.dst_port = 9, /* discard */
};

/* ---- state and cleanup ------------------------------------------------ */

/* A mapped ring. Producer rings (fill, TX): we own producer, the kernel
 * consumer. Consumer rings (RX, completion): the kernel owns producer, we
 * own consumer. cached_* are our private copies; for a producer ring
 * cached_cons is the kernel's consumer plus size, so that free slots are
 * cached_cons - cached_prod (as libxdp does). */
struct ring {
	uint32_t *producer, *consumer, *flags;
	void *descs; /* struct xdp_desc[] (RX, TX) or __u64[] (fill, completion) */
	uint32_t size, mask;
	uint32_t cached_prod, cached_cons;
	void *map;
	size_t map_len;
};

struct xsk {
	int fd;
	int ifindex;
	const char *ifname;
	uint32_t queue;
	struct ring rx, tx, fill, comp;
	uint64_t kicks, kicks_again;
};

static struct {
	uint8_t *area; /* the UMEM */
	size_t area_len;
	uint64_t *free; /* stack of frame addresses owned by us */
	uint32_t nfree;
	struct xsk xsk[2];
	int map_fd, prog_fd, link_fd;
	uint64_t wakeups; /* idle_wait's polls that found the socket ready */
} g = { .map_fd = -1, .prog_fd = -1, .link_fd = -1, .xsk = { { .fd = -1 }, { .fd = -1 } } };

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void ring_unmap(struct ring *r)
{
	if (r->map) {
		munmap(r->map, r->map_len);
		r->map = NULL;
	}
}

/* cleanup releases everything in reverse order of creation: the link
 * (detaches the program), the program, the map, the sockets and their
 * rings, the UMEM. It is idempotent. */
static void cleanup(void)
{
	if (g.link_fd >= 0)
		close(g.link_fd);
	if (g.prog_fd >= 0)
		close(g.prog_fd);
	if (g.map_fd >= 0)
		close(g.map_fd);
	g.link_fd = g.prog_fd = g.map_fd = -1;
	for (int i = 1; i >= 0; i--) {
		struct xsk *x = &g.xsk[i];
		ring_unmap(&x->rx);
		ring_unmap(&x->tx);
		ring_unmap(&x->fill);
		ring_unmap(&x->comp);
		if (x->fd >= 0)
			close(x->fd);
		x->fd = -1;
	}
	if (g.area) {
		munmap(g.area, g.area_len);
		g.area = NULL;
	}
	free(g.free);
	g.free = NULL;
}

__attribute__((noreturn, format(printf, 1, 2)))
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("xdpbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	cleanup();
	exit(1);
}

/* die_errno reports a failed call with errno's text. */
#define die_errno(what, ...)                                                   \
	do {                                                                   \
		int e_ = errno;                                                \
		die(what ": %s", ##__VA_ARGS__, strerror(e_));                 \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- option parsing --------------------------------------------------- */

static uint64_t parse_uint(const char *name, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		die("%s: want an integer in [%" PRIu64 ", %" PRIu64 "], got \"%s\"", name, min, max, s);
	return v;
}

static void parse_mac(const char *name, const char *s, uint8_t mac[6])
{
	unsigned int b[6];
	char extra;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &extra) != 6)
		die("%s: want a MAC address like 02:00:00:00:00:01, got \"%s\"", name, s);
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
}

static uint32_t parse_ip4(const char *name, const char *s)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		die("%s: want an IPv4 address, got \"%s\"", name, s);
	return a.s_addr;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: xdpbench -m MODE -i IF [options]\n"
		"  -m, --mode M        txonly | gen | sink | rxdrop | fwd (txonly)\n"
		"  -i, --iface IF      interface (fwd: the receiving one)\n"
		"  -o, --out-iface IF  fwd: the transmitting interface (-i, and --out-queue -q:\n"
		"                      a hairpin through one socket on that queue)\n"
		"  -q, --queue Q       queue of -i (0)\n"
		"      --out-queue Q   fwd: queue of -o (0)\n"
		"  -s, --size B        txonly: frame bytes incl. Ethernet header (64)\n"
		"  -b, --batch N       descriptors per ring operation (64)\n"
		"  -d, --duration S    seconds to run, 1..%d (5)\n"
		"  -n, --count N       stop after N frames (0: no limit)\n"
		"  -f, --frame-size B  UMEM chunk size, 2048 or 4096 (4096)\n"
		"  -F, --frames N      UMEM frames (4096)\n"
		"  -r, --ring N        size of every ring, a power of two (2048)\n"
		"  -c, --cpu N         pin to CPU N\n"
		"  -S, --skb-mode      attach XDP in generic (skb) mode, not native\n"
		"  -z, --zero-copy     bind with XDP_ZEROCOPY instead of XDP_COPY\n"
		"      --no-wakeup     bind without XDP_USE_NEED_WAKEUP (kick always)\n"
		"      --tx-budget N   set XDP_MAX_TX_SKB_BUDGET to N (Linux 6.15)\n"
		"      --rate PPS      txonly: pace to PPS frames per second (0: no pacing)\n"
		"      --drain         txonly: kick after each batch until the kernel took it\n"
		"                      (xdpkit txpath.Sender's strategy), not only on need_wakeup\n"
		"      --stamp         txonly: xdpgen -timestamp's magic (XKT1) and send time\n"
		"                      (CLOCK_TAI), stamped as each batch is submitted (-s >= 66)\n"
		"      --busy          txonly --rate: poll the clock for each frame's time instead\n"
		"                      of sleeping (one CPU, exact pacing, one frame per batch)\n"
		"      --l3            fwd: parse, decrement the TTL (checksum updated), drop what\n"
		"                      must not be routed, then rewrite the MACs\n"
		"      --src-mac MAC   txonly: source MAC (the interface's)\n"
		"      --dst-mac MAC   txonly, fwd: destination MAC (required)\n"
		"      --src-ip A      txonly: source IPv4 (198.18.0.1)\n"
		"      --dst-ip A      txonly: destination IPv4 (198.18.0.2)\n"
		"      --src-port P    txonly: UDP source port (12345)\n"
		"      --dst-port P    txonly: UDP destination port (9)\n"
		"      --latency       rxdrop: one-way delay of stamped packets (xdpgen -timestamp,\n"
		"                      txonly --stamp): p50, p99, p99.9\n"
		"      --spin          rxdrop: never sleep in poll(2)\n"
		"  -h, --help\n",
		MAX_DURATION);
}

enum {
	OPT_OUT_QUEUE = 256, OPT_NO_WAKEUP, OPT_TX_BUDGET, OPT_SRC_MAC, OPT_DST_MAC,
	OPT_SRC_IP, OPT_DST_IP, OPT_SRC_PORT, OPT_DST_PORT, OPT_RATE, OPT_DRAIN, OPT_L3,
	OPT_LATENCY, OPT_SPIN, OPT_STAMP, OPT_BUSY,
};

static void parse_args(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "iface", required_argument, NULL, 'i' },
		{ "out-iface", required_argument, NULL, 'o' },
		{ "queue", required_argument, NULL, 'q' },
		{ "out-queue", required_argument, NULL, OPT_OUT_QUEUE },
		{ "size", required_argument, NULL, 's' },
		{ "batch", required_argument, NULL, 'b' },
		{ "duration", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'n' },
		{ "frame-size", required_argument, NULL, 'f' },
		{ "frames", required_argument, NULL, 'F' },
		{ "ring", required_argument, NULL, 'r' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "skb-mode", no_argument, NULL, 'S' },
		{ "zero-copy", no_argument, NULL, 'z' },
		{ "no-wakeup", no_argument, NULL, OPT_NO_WAKEUP },
		{ "tx-budget", required_argument, NULL, OPT_TX_BUDGET },
		{ "src-mac", required_argument, NULL, OPT_SRC_MAC },
		{ "dst-mac", required_argument, NULL, OPT_DST_MAC },
		{ "src-ip", required_argument, NULL, OPT_SRC_IP },
		{ "dst-ip", required_argument, NULL, OPT_DST_IP },
		{ "src-port", required_argument, NULL, OPT_SRC_PORT },
		{ "dst-port", required_argument, NULL, OPT_DST_PORT },
		{ "rate", required_argument, NULL, OPT_RATE },
		{ "drain", no_argument, NULL, OPT_DRAIN },
		{ "stamp", no_argument, NULL, OPT_STAMP },
		{ "busy", no_argument, NULL, OPT_BUSY },
		{ "l3", no_argument, NULL, OPT_L3 },
		{ "latency", no_argument, NULL, OPT_LATENCY },
		{ "spin", no_argument, NULL, OPT_SPIN },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	bool found;

	o.src_ip = parse_ip4("--src-ip", "198.18.0.1");
	o.dst_ip = parse_ip4("--dst-ip", "198.18.0.2");
	while ((c = getopt_long(argc, argv, "m:i:o:q:s:b:d:n:f:F:r:c:Szh", longs, NULL)) != -1) {
		switch (c) {
		case 'm':
			found = false;
			for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++) {
				if (strcmp(optarg, mode_names[i]) == 0) {
					o.mode = (enum mode)i;
					found = true;
				}
			}
			if (!found)
				die("-m: unknown mode \"%s\" (txonly, gen, sink, rxdrop, fwd)", optarg);
			break;
		case 'i': o.ifname = optarg; break;
		case 'o': o.out_ifname = optarg; break;
		case 'q': o.queue = (uint32_t)parse_uint("-q", optarg, 0, XSKMAP_ENTRIES - 1); break;
		case OPT_OUT_QUEUE: o.out_queue = (uint32_t)parse_uint("--out-queue", optarg, 0, 65535); break;
		case 's': o.size = (uint32_t)parse_uint("-s", optarg, MIN_FRAME, 65536); break;
		case 'b': o.batch = (uint32_t)parse_uint("-b", optarg, 1, 65536); break;
		case 'd': o.duration = (uint32_t)parse_uint("-d", optarg, 1, MAX_DURATION); break;
		case 'n': o.count = parse_uint("-n", optarg, 0, UINT64_MAX / 2); break;
		case 'f': o.frame_size = (uint32_t)parse_uint("-f", optarg, 2048, 4096); break;
		case 'F': o.nframes = (uint32_t)parse_uint("-F", optarg, 64, 1 << 20); break;
		case 'r': o.ring = (uint32_t)parse_uint("-r", optarg, 64, 1 << 16); break;
		case 'c': o.cpu = (int)parse_uint("-c", optarg, 0, CPU_SETSIZE - 1); break;
		case 'S': o.generic = true; break;
		case 'z': o.zerocopy = true; break;
		case OPT_NO_WAKEUP: o.no_wakeup = true; break;
		case OPT_TX_BUDGET: o.tx_budget = (uint32_t)parse_uint("--tx-budget", optarg, 1, 1 << 16); break;
		case OPT_SRC_MAC: parse_mac("--src-mac", optarg, o.src_mac); o.have_src_mac = true; break;
		case OPT_DST_MAC: parse_mac("--dst-mac", optarg, o.dst_mac); o.have_dst_mac = true; break;
		case OPT_SRC_IP: o.src_ip = parse_ip4("--src-ip", optarg); break;
		case OPT_DST_IP: o.dst_ip = parse_ip4("--dst-ip", optarg); break;
		case OPT_SRC_PORT: o.src_port = (uint16_t)parse_uint("--src-port", optarg, 0, 65535); break;
		case OPT_DST_PORT: o.dst_port = (uint16_t)parse_uint("--dst-port", optarg, 0, 65535); break;
		case OPT_RATE: o.rate = parse_uint("--rate", optarg, 0, 1000000000); break;
		case OPT_DRAIN: o.drain = true; break;
		case OPT_STAMP: o.stamp = true; break;
		case OPT_BUSY: o.busy = true; break;
		case OPT_L3: o.l3 = true; break;
		case OPT_LATENCY: o.latency = true; break;
		case OPT_SPIN: o.spin = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(1);
		}
	}
	if (optind != argc)
		die("unexpected argument \"%s\" (see -h)", argv[optind]);
	if (!o.ifname)
		die("-i IF is required (see -h)");
	if (o.mode == M_FWD && !o.out_ifname)
		die("fwd needs -o OUT");
	if (o.mode != M_FWD && o.out_ifname)
		die("-o is only for fwd");
	if (o.mode != M_FWD && o.l3)
		die("--l3 is only for fwd");
	if ((o.mode == M_TXONLY || o.mode == M_GEN || o.mode == M_FWD) && !o.have_dst_mac)
		die("%s needs --dst-mac (the peer's MAC)", mode_names[o.mode]);
	if (o.frame_size != 2048 && o.frame_size != 4096)
		die("-f: the frame size must be 2048 or 4096, got %u", o.frame_size);
	if (o.ring & (o.ring - 1))
		die("-r: the ring size must be a power of two, got %u", o.ring);
	if (o.batch > o.ring)
		die("-b %u is larger than the rings (-r %u)", o.batch, o.ring);
	if (o.size > o.frame_size)
		die("-s %u does not fit in a frame of %u bytes (-f)", o.size, o.frame_size);
	if ((o.stamp || o.busy) && o.mode != M_TXONLY && o.mode != M_GEN)
		die("--stamp and --busy are only for txonly (gen)");
	if (o.stamp && o.size < STAMP_END)
		die("--stamp needs -s %u or more (headers, the 16-byte header and the 8-byte stamp)", STAMP_END);
	if (o.busy && !o.rate)
		die("--busy needs --rate");
}

/* hairpin: fwd out of the queue it receives on, through one socket. */
static bool hairpin(void)
{
	return o.mode == M_FWD && o.out_ifname && strcmp(o.ifname, o.out_ifname) == 0 &&
	       o.queue == o.out_queue;
}

/* ---- small system helpers --------------------------------------------- */

static int ifindex_of(const char *name)
{
	unsigned int i = if_nametoindex(name);

	if (i == 0)
		die_errno("interface \"%s\"", name);
	return (int)i;
}

static void mac_of(const char *name, uint8_t mac[6])
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die_errno("socket(AF_INET)");
	memset(&ifr, 0, sizeof(ifr));
	if (strlen(name) >= sizeof(ifr.ifr_name)) {
		close(fd);
		die("interface name \"%s\" is too long", name);
	}
	memcpy(ifr.ifr_name, name, strlen(name));
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		die_errno("SIOCGIFHWADDR %s", name);
	}
	close(fd);
	memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
}

/* rx_packets_of reads the interface's received packet count from
 * /proc/self/net/dev (the file of the process's network namespace). */
static uint64_t rx_packets_of(const char *name)
{
	char line[512];
	size_t nlen = strlen(name);
	FILE *f = fopen("/proc/self/net/dev", "re");
	uint64_t pkts = 0;
	bool found = false;

	if (!f)
		die_errno("open /proc/self/net/dev");
	for (int n = 0; n < 100000 && fgets(line, sizeof(line), f); n++) {
		const char *p = line;
		unsigned long long bytes, packets;

		while (*p == ' ')
			p++;
		if (strncmp(p, name, nlen) != 0 || p[nlen] != ':')
			continue;
		if (sscanf(p + nlen + 1, "%llu %llu", &bytes, &packets) != 2) {
			fclose(f);
			die("/proc/self/net/dev: cannot parse the line of %s", name);
		}
		pkts = packets;
		found = true;
		break;
	}
	fclose(f);
	if (!found)
		die("/proc/self/net/dev has no line for %s", name);
	return pkts;
}

static void pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		die_errno("sched_setaffinity(CPU %d)", cpu);
}

/* ---- bpf(2): XSKMAP, programs, link ------------------------------------ */

static int sys_bpf(int cmd, union bpf_attr *attr)
{
	return (int)syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	struct bpf_insn i;

	memset(&i, 0, sizeof(i));
	i.code = code;
	i.dst_reg = dst & 0xf;
	i.src_reg = src & 0xf;
	i.off = off;
	i.imm = imm;
	return i;
}

static char verifier_log[65536];

static int load_prog(const struct bpf_insn *insns, uint32_t n, const char *name)
{
	union bpf_attr a;
	static const char license[] = "Dual BSD/GPL";
	int fd;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_XDP;
	a.insns = (uint64_t)(uintptr_t)insns;
	a.insn_cnt = n;
	a.license = (uint64_t)(uintptr_t)license;
	snprintf(a.prog_name, sizeof(a.prog_name), "%s", name);
	fd = sys_bpf(BPF_PROG_LOAD, &a);
	if (fd >= 0)
		return fd;
	/* Load again with the verifier's log, to say why. */
	a.log_buf = (uint64_t)(uintptr_t)verifier_log;
	a.log_size = sizeof(verifier_log);
	a.log_level = 1;
	verifier_log[0] = 0;
	fd = sys_bpf(BPF_PROG_LOAD, &a);
	if (fd >= 0)
		return fd;
	{
		int e = errno;
		fprintf(stderr, "xdpbench: verifier log:\n%s\n", verifier_log);
		errno = e;
	}
	die_errno("BPF_PROG_LOAD %s (needs CAP_BPF or CAP_SYS_ADMIN)", name);
}

/* load_drop loads: return XDP_DROP. */
static int load_drop(void)
{
	struct bpf_insn p[2];

	p[0] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, XDP_DROP);
	p[1] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	return load_prog(p, 2, "xdpbench_drop");
}

/* load_redirect creates the XSKMAP and loads:
 *   return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
 * (the low bits of the flags are the action when the map has no entry,
 * Linux 5.3). */
static int load_redirect(int *map_fd)
{
	union bpf_attr a;
	struct bpf_insn p[6];

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_XSKMAP;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = XSKMAP_ENTRIES;
	snprintf(a.map_name, sizeof(a.map_name), "xdpbench_xsks");
	*map_fd = sys_bpf(BPF_MAP_CREATE, &a);
	if (*map_fd < 0)
		die_errno("BPF_MAP_CREATE XSKMAP (needs CAP_BPF or CAP_SYS_ADMIN)");

	p[0] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1,
		    (int16_t)offsetof(struct xdp_md, rx_queue_index), 0);
	p[1] = insn(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, *map_fd);
	p[2] = insn(0, 0, 0, 0, 0); /* upper 32 bits of the 64-bit immediate */
	p[3] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, XDP_PASS);
	p[4] = insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map);
	p[5] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	return load_prog(p, 6, "xdpbench_redir");
}

static void map_set(int map_fd, uint32_t key, uint32_t value)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)map_fd;
	a.key = (uint64_t)(uintptr_t)&key;
	a.value = (uint64_t)(uintptr_t)&value;
	a.flags = BPF_ANY;
	if (sys_bpf(BPF_MAP_UPDATE_ELEM, &a) < 0)
		die_errno("XSKMAP[%u] = socket", key);
}

static int attach(int prog_fd, int ifindex, const char *ifname)
{
	union bpf_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.link_create.prog_fd = (uint32_t)prog_fd;
	a.link_create.target_ifindex = (uint32_t)ifindex;
	a.link_create.attach_type = BPF_XDP;
	a.link_create.flags = o.generic ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
	fd = sys_bpf(BPF_LINK_CREATE, &a);
	if (fd < 0) {
		if (errno == EBUSY || errno == EEXIST)
			die_errno("attach XDP to %s: another XDP program is attached", ifname);
		if (errno == EOPNOTSUPP && !o.generic)
			die_errno("attach XDP to %s in native mode (try -S for generic mode)", ifname);
		die_errno("BPF_LINK_CREATE XDP on %s (Linux 5.9)", ifname);
	}
	return fd;
}

/* ---- rings -------------------------------------------------------------- */

static uint32_t prod_free(struct ring *r, uint32_t want)
{
	uint32_t n = r->cached_cons - r->cached_prod;

	if (n < want) {
		r->cached_cons = __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE) + r->size;
		n = r->cached_cons - r->cached_prod;
	}
	return n < want ? n : want;
}

static void prod_submit(struct ring *r, uint32_t n)
{
	r->cached_prod += n;
	__atomic_store_n(r->producer, r->cached_prod, __ATOMIC_RELEASE);
}

static uint32_t cons_avail(struct ring *r, uint32_t want)
{
	uint32_t n = r->cached_prod - r->cached_cons;

	if (n < want) {
		r->cached_prod = __atomic_load_n(r->producer, __ATOMIC_ACQUIRE);
		n = r->cached_prod - r->cached_cons;
	}
	return n < want ? n : want;
}

static void cons_release(struct ring *r, uint32_t n)
{
	r->cached_cons += n;
	__atomic_store_n(r->consumer, r->cached_cons, __ATOMIC_RELEASE);
}

static bool needs_wakeup(const struct ring *r)
{
	return __atomic_load_n(r->flags, __ATOMIC_RELAXED) & XDP_RING_NEED_WAKEUP;
}

/* tx_pending: the kernel has not consumed everything we put on the TX ring. */
static bool tx_pending(const struct ring *r)
{
	return __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE) != r->cached_prod;
}

static uint64_t *addr_slot(struct ring *r, uint32_t i)
{
	return &((uint64_t *)r->descs)[i & r->mask];
}

static struct xdp_desc *desc_slot(struct ring *r, uint32_t i)
{
	return &((struct xdp_desc *)r->descs)[i & r->mask];
}

static void ring_map(struct xsk *x, struct ring *r, const struct xdp_ring_offset *off,
		     uint64_t pgoff, size_t desc_size, bool producer, const char *what)
{
	r->map_len = off->desc + (size_t)o.ring * desc_size;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		      x->fd, (off_t)pgoff);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		die_errno("mmap %s ring of %s", what, x->ifname);
	}
	r->producer = (uint32_t *)((uint8_t *)r->map + off->producer);
	r->consumer = (uint32_t *)((uint8_t *)r->map + off->consumer);
	r->flags = (uint32_t *)((uint8_t *)r->map + off->flags);
	r->descs = (uint8_t *)r->map + off->desc;
	r->size = o.ring;
	r->mask = o.ring - 1;
	r->cached_prod = __atomic_load_n(r->producer, __ATOMIC_ACQUIRE);
	r->cached_cons = __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE);
	if (producer)
		r->cached_cons += r->size;
}

static void set_ring(int fd, int opt, const char *what, const char *ifname)
{
	int size = (int)o.ring;

	if (setsockopt(fd, SOL_XDP, opt, &size, sizeof(size)) < 0)
		die_errno("setsockopt %s ring (%u entries) on %s", what, o.ring, ifname);
}

/* xsk_open creates an AF_XDP socket on ifname/queue with the rings asked
 * for and binds it: owning the UMEM when shared is NULL, else sharing the
 * UMEM of shared (XDP_SHARED_UMEM, its own fill and completion rings). */
static void xsk_open(struct xsk *x, const char *ifname, uint32_t queue, bool rx, bool tx,
		     const struct xsk *shared)
{
	struct xdp_mmap_offsets off;
	socklen_t optlen = sizeof(off);
	struct sockaddr_xdp sxdp;
	int err = 0;

	x->ifname = ifname;
	x->ifindex = ifindex_of(ifname);
	x->queue = queue;
	x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->fd < 0)
		die_errno("socket(AF_XDP) (needs CAP_NET_RAW)");
	if (!shared) {
		struct xdp_umem_reg reg;

		memset(&reg, 0, sizeof(reg));
		reg.addr = (uint64_t)(uintptr_t)g.area;
		reg.len = g.area_len;
		reg.chunk_size = o.frame_size;
		reg.headroom = 0;
		if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) < 0)
			die_errno("XDP_UMEM_REG %zu bytes (CAP_IPC_LOCK or RLIMIT_MEMLOCK)", g.area_len);
	}
	set_ring(x->fd, XDP_UMEM_FILL_RING, "fill", ifname);
	set_ring(x->fd, XDP_UMEM_COMPLETION_RING, "completion", ifname);
	if (rx)
		set_ring(x->fd, XDP_RX_RING, "RX", ifname);
	if (tx)
		set_ring(x->fd, XDP_TX_RING, "TX", ifname);
	if (getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen) < 0)
		die_errno("getsockopt XDP_MMAP_OFFSETS");
	if (optlen < sizeof(off))
		die("XDP_MMAP_OFFSETS without ring flags: the kernel is older than 5.4");
	ring_map(x, &x->fill, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t), true, "fill");
	ring_map(x, &x->comp, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, sizeof(uint64_t), false, "completion");
	if (rx)
		ring_map(x, &x->rx, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc), false, "RX");
	if (tx)
		ring_map(x, &x->tx, &off.tx, XDP_PGOFF_TX_RING, sizeof(struct xdp_desc), true, "TX");
	if (tx && o.tx_budget) {
		int b = (int)o.tx_budget;

		if (setsockopt(x->fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &b, sizeof(b)) < 0)
			die_errno("setsockopt XDP_MAX_TX_SKB_BUDGET %d (Linux 6.15; 32..TX ring size)", b);
	}

	memset(&sxdp, 0, sizeof(sxdp));
	sxdp.sxdp_family = AF_XDP;
	sxdp.sxdp_ifindex = (uint32_t)x->ifindex;
	sxdp.sxdp_queue_id = queue;
	if (shared) {
		sxdp.sxdp_flags = XDP_SHARED_UMEM;
		sxdp.sxdp_shared_umem_fd = (uint32_t)shared->fd;
	} else {
		sxdp.sxdp_flags = (uint16_t)((o.zerocopy ? XDP_ZEROCOPY : XDP_COPY) |
					     (o.no_wakeup ? 0 : XDP_USE_NEED_WAKEUP));
	}
	/* A queue is released some milliseconds after its previous socket
	 * closed: retry EBUSY for up to half a second. */
	for (int i = 0; i < BIND_RETRIES; i++) {
		if (bind(x->fd, (struct sockaddr *)&sxdp, sizeof(sxdp)) == 0)
			return;
		err = errno;
		if (err != EBUSY)
			break;
		usleep(10000);
	}
	errno = err;
	if (err == EOPNOTSUPP && o.zerocopy && !shared)
		die_errno("bind AF_XDP to %s queue %u: the driver has no zero-copy (drop -z)", ifname, queue);
	die_errno("bind AF_XDP to %s queue %u%s", ifname, queue,
		  shared ? " (shared UMEM)" : o.zerocopy ? " (zero-copy)" : " (copy mode)");
}

/* kick asks the kernel to process the TX ring (copy mode sends here). */
static void kick_tx(struct xsk *x)
{
	x->kicks++;
	if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
		return;
	switch (errno) {
	case EAGAIN: case EBUSY: case ENOBUFS: case ENETDOWN:
		x->kicks_again++; /* budget used up (copy mode sends 32 per call by default) or transient: go on */
		return;
	default:
		die_errno("sendto (TX kick) on %s", x->ifname);
	}
}

/* kick_rx wakes the driver up to take buffers from the fill ring. */
static void kick_rx(struct xsk *x)
{
	x->kicks++;
	if (recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL) >= 0)
		return;
	switch (errno) {
	case EAGAIN: case EBUSY: case ENOBUFS: case ENETDOWN:
		x->kicks_again++;
		return;
	default:
		die_errno("recvfrom (fill kick) on %s", x->ifname);
	}
}

/* idle_wait sleeps in poll(2) until the socket has events or 1 ms passed. */
static void idle_wait(struct xsk *x, short events)
{
	struct pollfd p = { .fd = x->fd, .events = events };
	int n = poll(&p, 1, POLL_TIMEOUT_MS);

	if (n < 0 && errno != EINTR)
		die_errno("poll on %s", x->ifname);
	if (n > 0)
		g.wakeups++;
}

static void stats_of(struct xsk *x, struct xdp_statistics *st)
{
	socklen_t len = sizeof(*st);

	memset(st, 0, sizeof(*st));
	if (getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, st, &len) < 0)
		die_errno("getsockopt XDP_STATISTICS on %s", x->ifname);
}

/* ---- UMEM ------------------------------------------------------------- */

static void umem_create(void)
{
	g.area_len = (size_t)o.nframes * o.frame_size;
	g.area = mmap(NULL, g.area_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (g.area == MAP_FAILED) {
		g.area = NULL;
		die_errno("mmap UMEM of %zu bytes", g.area_len);
	}
	g.free = calloc(o.nframes, sizeof(*g.free));
	if (!g.free)
		die_errno("calloc free list");
	for (uint32_t i = 0; i < o.nframes; i++)
		g.free[i] = (uint64_t)(o.nframes - 1 - i) * o.frame_size;
	g.nfree = o.nframes;
}

static void free_push(uint64_t addr)
{
	if (g.nfree >= o.nframes)
		die("internal error: more frames returned than the UMEM has");
	/* Aligned mode: the kernel may hand back an address inside the
	 * chunk; keep the chunk's start. */
	g.free[g.nfree++] = addr & ~(uint64_t)(o.frame_size - 1);
}

/* fill_refill tops the fill ring up from the free list. */
static void fill_refill(struct xsk *x)
{
	uint32_t n = prod_free(&x->fill, g.nfree);

	if (n == 0)
		return;
	for (uint32_t i = 0; i < n; i++)
		*addr_slot(&x->fill, x->fill.cached_prod + i) = g.free[--g.nfree];
	prod_submit(&x->fill, n);
}

/* ---- packet ----------------------------------------------------------- */

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* udp_sum0 is the UDP checksum's sum (pseudo-header included, not folded)
 * of the packet build_packet writes, with a zero stamp under --stamp. */
static uint32_t udp_sum0;

/* build_packet writes an Ethernet + IPv4 + UDP frame of o.size bytes with
 * valid checksums into p. */
static void build_packet(uint8_t *p, const uint8_t src_mac[6])
{
	uint8_t *ip = p + ETH_HLEN_, *udp = ip + IP_HLEN_;
	uint32_t sum;
	uint16_t ulen = (uint16_t)(o.size - ETH_HLEN_ - IP_HLEN_), c;

	memcpy(p, o.dst_mac, 6);
	memcpy(p + 6, src_mac, 6);
	put16(p + 12, 0x0800);

	memset(ip, 0, IP_HLEN_);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)(o.size - ETH_HLEN_));
	put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = 17; /* UDP */
	memcpy(ip + 12, &o.src_ip, 4);
	memcpy(ip + 16, &o.dst_ip, 4);
	put16(ip + 10, fold(sum16(ip, IP_HLEN_, 0)));

	put16(udp, o.src_port);
	put16(udp + 2, o.dst_port);
	put16(udp + 4, ulen);
	put16(udp + 6, 0);
	for (uint32_t i = UDP_HLEN_; i < ulen; i++)
		udp[i] = (uint8_t)i;
	if (o.stamp) {
		memcpy(p + STAMP_OFF, "XKT1", 4);
		memset(p + STAMP_OFF + 16, 0, 8);
	}
	sum = sum16(ip + 12, 8, 0) + 17 + ulen; /* pseudo-header */
	udp_sum0 = sum16(udp, ulen, sum);
	c = fold(udp_sum0);
	put16(udp + 6, c ? c : 0xffff);
}

/* stamp_packet writes the send time t into a frame build_packet wrote and
 * sets its UDP checksum for it: the template's sum plus the stamp's four
 * 16-bit words (the template's stamp is zero). */
static void stamp_packet(uint8_t *p, uint64_t t)
{
	uint8_t *st = p + STAMP_OFF + 16;
	uint16_t c;

	for (int i = 0; i < 8; i++)
		st[i] = (uint8_t)(t >> (56 - 8 * i));
	c = fold(sum16(st, 8, udp_sum0));
	put16(p + ETH_HLEN_ + IP_HLEN_ + 6, c ? c : 0xffff);
}

/* ---- reporting ------------------------------------------------------------ */

static double secs(uint64_t ns) { return (double)ns / 1e9; }

static double mpps(uint64_t frames, uint64_t ns)
{
	return ns ? (double)frames / ((double)ns / 1e9) / 1e6 : 0;
}

static void ready(void)
{
	fprintf(stderr, "xdpbench: ready: %s on %s%s%s\n", mode_names[o.mode], o.ifname,
		o.out_ifname ? " -> " : "", o.out_ifname ? o.out_ifname : "");
}

static bool time_up(uint64_t now, uint64_t deadline)
{
	return stop || now >= deadline;
}

/* ---- modes -------------------------------------------------------------- */

static uint64_t tai_ns(void);

static void run_txonly(void)
{
	struct xsk *x = &g.xsk[0];
	uint8_t src_mac[6];
	uint64_t submitted = 0, completed = 0, start, end, deadline, now;
	uint32_t idle = 0;
	struct xdp_statistics st;

	if (o.have_src_mac)
		memcpy(src_mac, o.src_mac, 6);
	else
		mac_of(o.ifname, src_mac);
	umem_create();
	for (uint32_t i = 0; i < o.nframes; i++)
		build_packet(g.area + (size_t)i * o.frame_size, src_mac);
	xsk_open(x, o.ifname, o.queue, false, true, NULL);
	ready();

	start = now = now_ns();
	deadline = start + (uint64_t)o.duration * 1000000000ULL;
	while (!time_up(now, deadline)) {
		uint32_t done, n, want;

		/* Reap every completion there is, in one batch. */
		done = cons_avail(&x->comp, x->comp.size);
		for (uint32_t i = 0; i < done; i++)
			free_push(*addr_slot(&x->comp, x->comp.cached_cons + i));
		if (done)
			cons_release(&x->comp, done);
		completed += done;
		if (o.count && completed >= o.count)
			break;

		want = o.batch < g.nfree ? o.batch : g.nfree;
		if (o.count && o.count - submitted < want)
			want = (uint32_t)(o.count - submitted);
		if (o.rate) {
			/* Paced: no more than rate * elapsed frames so far; when
			 * ahead, sleep until the next batch is due. */
			uint64_t due = (uint64_t)((double)(now - start) * (double)o.rate / 1e9) + 1;

			if (due <= submitted) {
				/* Frame k (from 0) is due at k/rate. Sleeping waits
				 * for a whole batch; polling the clock sends each
				 * frame when it is due. */
				uint64_t ahead = o.busy ? 0 : want;
				uint64_t at = start + (uint64_t)((double)(submitted + ahead) * 1e9 / (double)o.rate);

				if (at > now && o.busy) {
					while (now_ns() < at && !stop)
						;
				} else if (at > now) {
					struct timespec ts = { (time_t)(at / 1000000000ULL), (long)(at % 1000000000ULL) };

					clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
				}
				now = now_ns();
				continue;
			}
			if (due - submitted < want)
				want = (uint32_t)(due - submitted);
		}
		n = prod_free(&x->tx, want);
		uint64_t t = n && o.stamp ? tai_ns() : 0;
		for (uint32_t i = 0; i < n; i++) {
			struct xdp_desc *d = desc_slot(&x->tx, x->tx.cached_prod + i);

			d->addr = g.free[--g.nfree];
			d->len = o.size;
			d->options = 0;
			if (o.stamp)
				stamp_packet(g.area + d->addr, t);
		}
		if (n)
			prod_submit(&x->tx, n);
		submitted += n;

		if (o.drain) {
			/* txpath.Sender's Flush: kick while the ring holds
			 * descriptors the kernel has not taken (copy mode takes 32
			 * per call), bounded, reaping in between. */
			for (uint32_t i = 0, lim = (x->tx.cached_prod - __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE)) / 16 + 2;
			     i < lim && tx_pending(&x->tx); i++) {
				uint32_t d;

				kick_tx(x);
				d = cons_avail(&x->comp, x->comp.size);
				for (uint32_t j = 0; j < d; j++)
					free_push(*addr_slot(&x->comp, x->comp.cached_cons + j));
				if (d)
					cons_release(&x->comp, d);
				completed += d;
			}
		} else if (tx_pending(&x->tx) && (o.no_wakeup || needs_wakeup(&x->tx))) {
			kick_tx(x);
		}
		if (n == 0 && done == 0) {
			if (++idle > IDLE_SPINS)
				idle_wait(x, POLLOUT);
		} else {
			idle = 0;
		}
		now = now_ns();
	}
	/* Let the last frames complete (bounded). */
	deadline = now_ns() + DRAIN_NS;
	for (now = now_ns(); completed < submitted && now < deadline; now = now_ns()) {
		uint32_t done = cons_avail(&x->comp, x->comp.size);

		for (uint32_t i = 0; i < done; i++)
			free_push(*addr_slot(&x->comp, x->comp.cached_cons + i));
		if (done) {
			cons_release(&x->comp, done);
			completed += done;
		} else if (tx_pending(&x->tx)) {
			kick_tx(x);
		}
	}
	end = now_ns();
	stats_of(x, &st);
	printf("{\"mode\":\"%s\",\"frames\":%" PRIu64 ",\"seconds\":%.6f,\"mpps\":%.4f,"
	       "\"gbps\":%.4f,\"iface\":\"%s\",\"queue\":%u,\"size\":%u,\"batch\":%u,"
	       "\"ring\":%u,\"frame_size\":%u,\"submitted\":%" PRIu64 ",\"kicks\":%" PRIu64
	       ",\"kicks_again\":%" PRIu64 ",\"tx_budget\":%u,\"tx_invalid_descs\":%llu,"
	       "\"tx_ring_empty_descs\":%llu,\"rate\":%" PRIu64 ",\"strategy\":\"%s\",\"stamp\":%s,\"busy\":%s}\n",
	       mode_names[o.mode], completed, secs(end - start), mpps(completed, end - start),
	       mpps(completed, end - start) * o.size * 8 / 1e3, o.ifname, o.queue, o.size,
	       o.batch, o.ring, o.frame_size, submitted, x->kicks, x->kicks_again, o.tx_budget,
	       (unsigned long long)st.tx_invalid_descs, (unsigned long long)st.tx_ring_empty_descs,
	       o.rate, o.drain ? "drain" : "ring", o.stamp ? "true" : "false", o.busy ? "true" : "false");
}

static void run_sink(void)
{
	int ifindex = ifindex_of(o.ifname);
	uint64_t rx0, rx1, start, end, deadline, now;

	g.prog_fd = load_drop();
	g.link_fd = attach(g.prog_fd, ifindex, o.ifname);
	rx0 = rx_packets_of(o.ifname);
	ready();
	start = now = now_ns();
	deadline = start + (uint64_t)o.duration * 1000000000ULL;
	rx1 = rx0;
	while (!time_up(now, deadline)) {
		struct timespec ts = { 0, 100000000 }; /* the kernel does the work */

		nanosleep(&ts, NULL);
		rx1 = rx_packets_of(o.ifname);
		if (o.count && rx1 - rx0 >= o.count)
			break;
		now = now_ns();
	}
	end = now_ns();
	rx1 = rx_packets_of(o.ifname);
	printf("{\"mode\":\"sink\",\"frames\":%" PRIu64 ",\"seconds\":%.6f,\"mpps\":%.4f,"
	       "\"iface\":\"%s\",\"xdp\":\"%s\"}\n",
	       rx1 - rx0, secs(end - start), mpps(rx1 - rx0, end - start), o.ifname,
	       o.generic ? "generic" : "native");
}

/* rx_json_open: print_rx_json opens the JSON object (false when the
 * caller already printed its first fields). */
static bool rx_json_open = true;

static void print_rx_json(uint64_t frames, uint64_t first, uint64_t last, uint64_t wall,
			  struct xdp_statistics *st, uint64_t tx_completed, uint64_t kicks,
			  uint64_t kicks_again, uint64_t not_routed)
{
	if (rx_json_open)
		putchar('{');
	printf("\"mode\":\"%s\",\"frames\":%" PRIu64 ",\"seconds\":%.6f,\"mpps\":%.4f,"
	       "\"rx_dropped\":%llu,\"rx_ring_full\":%llu,\"fill_empty\":%llu,"
	       "\"rx_invalid_descs\":%llu,\"wall_seconds\":%.6f,\"iface\":\"%s\",\"queue\":%u,"
	       "\"batch\":%u,\"ring\":%u,\"frame_size\":%u,\"kicks\":%" PRIu64 ",\"kicks_again\":%" PRIu64
	       ",\"wakeups\":%" PRIu64,
	       mode_names[o.mode], frames, secs(last - first), mpps(frames, last - first),
	       (unsigned long long)st->rx_dropped, (unsigned long long)st->rx_ring_full,
	       (unsigned long long)st->rx_fill_ring_empty_descs,
	       (unsigned long long)st->rx_invalid_descs, secs(wall), o.ifname, o.queue,
	       o.batch, o.ring, o.frame_size, kicks, kicks_again, g.wakeups);
	if (o.mode == M_FWD)
		printf(",\"out_iface\":\"%s\",\"tx_completed\":%" PRIu64 ",\"l3\":%s,\"not_routed\":%" PRIu64
		       ",\"hairpin\":%s",
		       o.out_ifname, tx_completed, o.l3 ? "true" : "false", not_routed, hairpin() ? "true" : "false");
	printf("}\n");
}

/* setup_rx_program loads the redirect program, points queue's XSKMAP
 * entry at x and attaches the program to x's interface. */
static void setup_rx_program(struct xsk *x)
{
	g.prog_fd = load_redirect(&g.map_fd);
	map_set(g.map_fd, x->queue, (uint32_t)x->fd);
	g.link_fd = attach(g.prog_fd, x->ifindex, x->ifname);
}

/* The latency histogram: values below 64 ns exactly, above them 64
 * buckets per power of two, up to 2^(LAT_EXP_MAX+1) ns (about 137 s). */
#define LAT_SUB 64
#define LAT_EXP_MAX 36
#define LAT_BUCKETS (LAT_SUB + (LAT_EXP_MAX - 5) * LAT_SUB)
#define STAMP_MAGIC 0x584b5431u /* "XKT1", payload.MagicStamped */

static struct {
	uint64_t count[LAT_BUCKETS];
	uint64_t samples, negative, max;
} lat;

static uint32_t lat_bucket(uint64_t v)
{
	uint32_t e;

	if (v < LAT_SUB)
		return (uint32_t)v;
	e = 63 - (uint32_t)__builtin_clzll(v);
	if (e > LAT_EXP_MAX)
		return LAT_BUCKETS - 1;
	return LAT_SUB + (e - 6) * LAT_SUB + (uint32_t)((v >> (e - 6)) - LAT_SUB);
}

/* lat_value is the middle of bucket i. */
static uint64_t lat_value(uint32_t i)
{
	uint32_t e, m;

	if (i < LAT_SUB)
		return i;
	e = (i - LAT_SUB) / LAT_SUB + 6;
	m = (i - LAT_SUB) % LAT_SUB + LAT_SUB;
	return ((uint64_t)m << (e - 6)) + ((1ULL << (e - 6)) >> 1);
}

/* lat_quantile is the value at quantile q (0..1): the bucket holding the
 * ceil(q*samples)-th smallest sample. */
static uint64_t lat_quantile(double q)
{
	uint64_t rank = (uint64_t)(q * (double)lat.samples), seen = 0;

	if ((double)rank < q * (double)lat.samples)
		rank++;
	if (rank == 0)
		rank = 1;
	for (uint32_t i = 0; i < LAT_BUCKETS; i++) {
		seen += lat.count[i];
		if (seen >= rank)
			return lat_value(i);
	}
	return 0;
}

static uint64_t tai_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_TAI, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* lat_observe records the delay of a stamped frame seen at now (TAI ns). */
static void lat_observe(const struct xdp_desc *d, uint64_t now)
{
	const uint8_t *p;
	uint64_t sent = 0;
	uint32_t magic;

	if (d->len < STAMP_OFF + 24 || d->addr + d->len > g.area_len)
		return;
	p = g.area + d->addr + STAMP_OFF;
	magic = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	if (magic != STAMP_MAGIC)
		return;
	for (int i = 16; i < 24; i++)
		sent = sent << 8 | p[i];
	if ((int64_t)sent > (int64_t)now) {
		lat.negative++;
		return;
	}
	lat.count[lat_bucket(now - sent)]++;
	lat.samples++;
	if (now - sent > lat.max)
		lat.max = now - sent;
}

static void run_rxdrop(void)
{
	struct xsk *x = &g.xsk[0];
	uint64_t frames = 0, first = 0, last = 0, start, now, deadline, cpu0;
	uint32_t idle = 0;
	struct xdp_statistics st;

	umem_create();
	xsk_open(x, o.ifname, o.queue, true, false, NULL);
	fill_refill(x);
	setup_rx_program(x);
	ready();
	cpu0 = cpu_ns();

	start = now = now_ns();
	deadline = start + (uint64_t)o.duration * 1000000000ULL;
	while (!time_up(now, deadline)) {
		uint32_t n = cons_avail(&x->rx, o.batch);

		if (n) {
			if (o.latency) {
				uint64_t t = tai_ns();

				for (uint32_t i = 0; i < n; i++)
					lat_observe(desc_slot(&x->rx, x->rx.cached_cons + i), t);
			}
			for (uint32_t i = 0; i < n; i++)
				free_push(desc_slot(&x->rx, x->rx.cached_cons + i)->addr);
			cons_release(&x->rx, n);
			fill_refill(x); /* the frames go back at once */
			frames += n;
			now = now_ns();
			if (!first)
				first = now;
			last = now;
			idle = 0;
			if (o.count && frames >= o.count)
				break;
			continue;
		}
		fill_refill(x);
		if (needs_wakeup(&x->fill))
			kick_rx(x);
		if (!o.spin && ++idle > IDLE_SPINS)
			idle_wait(x, POLLIN);
		now = now_ns();
	}
	stats_of(x, &st);
	if (o.latency) {
		/* print_rx_json's closing brace comes after these fields. */
		printf("{\"lat_samples\":%" PRIu64 ",\"lat_negative\":%" PRIu64 ",\"lat_p50_ns\":%" PRIu64
		       ",\"lat_p99_ns\":%" PRIu64 ",\"lat_p999_ns\":%" PRIu64 ",\"lat_max_ns\":%" PRIu64
		       ",\"cpu_ns\":%" PRIu64 ",\"spin\":%s,",
		       lat.samples, lat.negative, lat_quantile(0.5), lat_quantile(0.99), lat_quantile(0.999),
		       lat.max, cpu_ns() - cpu0, o.spin ? "true" : "false");
		/* The deciles, p10 to p90, as xdpkitbench writes them. */
		printf("\"lat_deciles_ns\":[");
		for (int i = 1; i <= 9; i++)
			printf("%s%" PRIu64, i > 1 ? "," : "", lat_quantile(i / 10.0));
		printf("],");
		rx_json_open = false;
	}
	print_rx_json(frames, first, last, now_ns() - start, &st, 0, x->kicks, x->kicks_again, 0);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* l4_ok checks a UDP or TCP header at off of the IP datagram that ends at
 * end, as pkt.Parse does (other protocols pass unchecked). */
static bool l4_ok(const uint8_t *p, uint32_t off, uint32_t end, uint8_t proto)
{
	switch (proto) {
	case 17: { /* UDP */
		uint32_t l;

		if (end < off + 8)
			return false;
		l = get16(p + off + 4);
		return l >= 8 && off + l <= end;
	}
	case 6: { /* TCP */
		uint32_t d;

		if (end < off + 20)
			return false;
		d = (uint32_t)(p[off + 12] >> 4) * 4;
		return d >= 20 && off + d <= end;
	}
	case 1: case 58: /* ICMP, ICMPv6 */
		return end >= off + 4;
	}
	return true;
}

/* l3_route is fwd --l3's work on one frame before the MAC rewrite: what
 * xdpkit's pkt.Parse and pkt.DecTTL do for the forwarder. It returns false
 * (and the frame is dropped) for a frame that is cut short, malformed, not
 * IP, or whose TTL or hop limit is 1 or 0. IPv6 extension headers are not
 * walked (the benchmark sends none): a packet with one is routed after the
 * fixed header's checks. */
static bool l3_route(uint8_t *p, uint32_t len)
{
	uint32_t off = 14, vlans = 0;
	uint16_t et;

	if (len < 14)
		return false;
	et = get16(p + 12);
	while ((et == 0x8100 || et == 0x88a8) && vlans < 2) {
		if (len < off + 4)
			return false;
		et = get16(p + off + 2);
		off += 4;
		vlans++;
	}
	if (et == 0x0800) {
		uint8_t *ip = p + off;
		uint32_t ihl, total, s;
		uint16_t old;

		if (len < off + 20 || ip[0] >> 4 != 4)
			return false;
		ihl = (uint32_t)(ip[0] & 15) * 4;
		total = get16(ip + 2);
		if (ihl < 20 || total < ihl || len - off < total)
			return false;
		if ((get16(ip + 6) & 0x1fff) == 0 && !l4_ok(p, off + ihl, off + total, ip[9]))
			return false;
		if (ip[8] <= 1)
			return false;
		/* TTL decrement, checksum updated incrementally (RFC 1624:
		 * HC' = ~(~HC + ~m + m')) over the TTL/protocol word. */
		old = get16(ip + 8);
		ip[8]--;
		s = (uint32_t)(uint16_t)~get16(ip + 10) + (uint16_t)~old + get16(ip + 8);
		s = (s & 0xffff) + (s >> 16);
		s = (s & 0xffff) + (s >> 16);
		put16(ip + 10, (uint16_t)~s);
		return true;
	}
	if (et == 0x86dd) {
		uint8_t *ip = p + off;
		uint32_t total;

		if (len < off + 40 || ip[0] >> 4 != 6)
			return false;
		total = 40 + (uint32_t)get16(ip + 4);
		if (len - off < total || !l4_ok(p, off + 40, off + total, ip[6]))
			return false;
		if (ip[7] <= 1)
			return false;
		ip[7]--;
		return true;
	}
	return false;
}

static void run_fwd(void)
{
	struct xsk *in = &g.xsk[0], *out = &g.xsk[1];
	uint8_t out_mac[6];
	uint64_t frames = 0, completed = 0, not_routed = 0, first = 0, last = 0, start, now, deadline;
	uint32_t idle = 0;
	struct xdp_statistics st;

	mac_of(o.out_ifname, out_mac);
	umem_create();
	if (hairpin()) {
		/* One socket with both rings: RX descriptors become TX ones
		 * of the same socket, completions come back on its own
		 * completion ring. */
		xsk_open(in, o.ifname, o.queue, true, true, NULL);
		out = in;
	} else {
		xsk_open(in, o.ifname, o.queue, true, false, NULL);
		xsk_open(out, o.out_ifname, o.out_queue, false, true, in);
	}
	fill_refill(in);
	setup_rx_program(in);
	ready();

	start = now = now_ns();
	deadline = start + (uint64_t)o.duration * 1000000000ULL;
	while (!time_up(now, deadline)) {
		uint32_t done, room, n, sent = 0;

		/* Completed transmissions become free frames... */
		done = cons_avail(&out->comp, out->comp.size);
		for (uint32_t i = 0; i < done; i++)
			free_push(*addr_slot(&out->comp, out->comp.cached_cons + i));
		if (done)
			cons_release(&out->comp, done);
		completed += done;

		/* ...received ones are rewritten and put on the TX ring. */
		room = prod_free(&out->tx, o.batch);
		n = cons_avail(&in->rx, room);
		for (uint32_t i = 0; i < n; i++) {
			const struct xdp_desc *r = desc_slot(&in->rx, in->rx.cached_cons + i);
			uint64_t addr = r->addr;
			uint32_t len = r->len;
			uint8_t *pkt;

			if (len < ETH_HLEN_ || addr + len > g.area_len) {
				free_push(addr);
				continue;
			}
			pkt = g.area + addr;
			if (o.l3 && !l3_route(pkt, len)) {
				free_push(addr);
				not_routed++;
				continue;
			}
			memcpy(pkt, o.dst_mac, 6);
			memcpy(pkt + 6, out_mac, 6);
			struct xdp_desc *t = desc_slot(&out->tx, out->tx.cached_prod + sent);
			t->addr = addr;
			t->len = len;
			t->options = 0;
			sent++;
		}
		if (n) {
			cons_release(&in->rx, n);
			if (sent)
				prod_submit(&out->tx, sent);
			frames += sent;
			now = now_ns();
			if (!first)
				first = now;
			last = now;
		}
		fill_refill(in); /* ...and completed ones go back to the fill ring */
		if (tx_pending(&out->tx) && (o.no_wakeup || needs_wakeup(&out->tx)))
			kick_tx(out);
		if (n == 0 && done == 0) {
			if (needs_wakeup(&in->fill))
				kick_rx(in);
			if (++idle > IDLE_SPINS && !tx_pending(&out->tx))
				idle_wait(in, POLLIN);
		} else {
			idle = 0;
		}
		if (o.count && frames >= o.count)
			break;
		now = now_ns();
	}
	/* Let the last frames complete (bounded). */
	deadline = now_ns() + DRAIN_NS;
	while (completed < frames && now_ns() < deadline) {
		uint32_t done = cons_avail(&out->comp, out->comp.size);

		for (uint32_t i = 0; i < done; i++)
			free_push(*addr_slot(&out->comp, out->comp.cached_cons + i));
		if (done)
			cons_release(&out->comp, done);
		else if (tx_pending(&out->tx))
			kick_tx(out);
		completed += done;
	}
	stats_of(in, &st);
	print_rx_json(frames, first, last, now_ns() - start, &st, completed,
		      in->kicks + (out != in ? out->kicks : 0),
		      in->kicks_again + (out != in ? out->kicks_again : 0), not_routed);
}

int main(int argc, char **argv)
{
	struct sigaction sa;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (o.cpu >= 0)
		pin_cpu(o.cpu);

	switch (o.mode) {
	case M_TXONLY:
	case M_GEN:
		run_txonly();
		break;
	case M_SINK:
		run_sink();
		break;
	case M_RXDROP:
		run_rxdrop();
		break;
	case M_FWD:
		run_fwd();
		break;
	}
	cleanup();
	if (fflush(stdout) != 0)
		die_errno("write the result");
	return 0;
}
