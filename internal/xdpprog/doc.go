// Package xdpprog builds, loads and attaches the XDP program that steers
// received packets into AF_XDP sockets.
//
// The program is assembled at run time with github.com/cilium/ebpf/asm, so
// neither clang nor a generated object is needed to build xdpkit. Its logic is
//
//	if the filter rejects the packet { return XDP_PASS }
//	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)
//
// where xsks is an XSKMAP indexed by receive queue. Passing XDP_PASS as the
// flags of bpf_redirect_map makes a packet arriving on a queue with no
// registered socket fall through to the kernel stack instead of being dropped.
//
// # Filter
//
// A nil *Filter redirects every packet on a queue that has a socket. With a
// Filter, the program parses Ethernet, at most one 802.1Q / 802.1ad tag, IPv4
// (honouring IHL) or IPv6 (fixed header only), and the UDP or TCP header, with
// a bounds check against data_end before every read. A packet is redirected
// only if every header it needs is present in the linear part of the frame
// (data..data_end) and it matches the filter; everything else — ARP, ICMP,
// ICMPv6 and neighbour discovery, IPv6 extension headers, truncated or
// malformed frames, other protocols and ports, and packets addressed to one
// of Filter.PassDst — goes to the kernel with XDP_PASS. With Filter.OnlyDst,
// so do packets addressed to anything else than one of its addresses.
//
// IPv4 fragments: without DstPorts every fragment of a selected protocol is
// redirected (non-first fragments carry no L4 header to check). With
// DstPorts, every fragment (MF set or non-zero offset) goes to the kernel, so
// that the kernel sees all pieces of a datagram and can reassemble it; the
// first fragment is not split off to the socket.
//
// # Modes and multi-buffer
//
// Attach links the program with a bpf_link (BPF_LINK_CREATE), so it is
// detached when the link is closed or the process dies. ModeAuto tries the
// driver (native) hook first and falls back to the generic (skb) hook.
// Native attach on an interface whose MTU does not fit one page (minus
// headroom and skb_shared_info) fails with ERANGE unless the program was
// loaded with BPF_F_XDP_HAS_FRAGS; Attach then reloads the program with that
// flag and retries, and Frags reports the choice. With frags the program still
// reads headers from the linear part only.
//
// # Capabilities
//
// Loading (creating the XSKMAP and the program) needs CAP_BPF and
// CAP_NET_ADMIN (or CAP_SYS_ADMIN). On 6.18 attaching through BPF_LINK_CREATE
// checks no further capability (holding the program's fd is enough); should a
// kernel refuse it, the error names CAP_NET_ADMIN. A permission failure is a
// *CapabilityError naming the capabilities, which matches ErrPermission and
// os.ErrPermission with errors.Is.
//
// Attach resolves the interface index with rtnetlink in the calling thread's
// network namespace (BPF_LINK_CREATE reports an unknown index only as
// EINVAL), so an unknown index gives ErrNoInterface.
//
// Nothing is pinned: the program, its maps and its link live as long as the
// Program (or the process).
package xdpprog
