// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//go:build ignore

// An XDP program of the user's own, as a load balancer or firewall would
// have: it sends UDP datagrams to one port (IPv4 without fragments, IPv6
// without extension headers) to the AF_XDP socket registered for the
// receive queue in xsks, everything else to the kernel, and counts both.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// The sockets, by receive queue; xdpkit's xsk.Map fills it.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

enum { STAT_REDIRECTED, STAT_PASSED, STAT_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// The UDP destination port to redirect, in host byte order; set before
// loading.
volatile const __u16 port = 9000;

static __always_inline int to_port(void *data, void *end)
{
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__u8 proto;

	if ((void *)(eth + 1) > end)
		return 0;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return 0;
		if (ip->frag_off & bpf_htons(0x3fff)) /* MF or an offset */
			return 0;
		proto = ip->protocol;
		udp = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return 0;
		proto = ip6->nexthdr;
		udp = (void *)(ip6 + 1);
	} else {
		return 0;
	}
	if (proto != IPPROTO_UDP || (void *)(udp + 1) > end)
		return 0;
	return udp->dest == bpf_htons(port);
}

SEC("xdp")
int xdp_udp_port(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 key = STAT_PASSED;
	int act = XDP_PASS;
	__u64 *n;

	if (to_port(data, end)) {
		/* XDP_PASS when no socket is registered for the queue. */
		act = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
		if (act == XDP_REDIRECT)
			key = STAT_REDIRECTED;
	}
	n = bpf_map_lookup_elem(&stats, &key);
	if (n)
		(*n)++;
	return act;
}

char __license[] SEC("license") = "Dual BSD/GPL";
