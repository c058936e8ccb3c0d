// Package conformance runs the kernel's own AF_XDP test suite
// (tools/testing/selftests/bpf/prog_tests/test_xsk.c, formerly
// xskxceiver.c) against xdpkit's public API: one Go test per kernel test
// case, named after it, each checking what the kernel's version checks
// (packet counts, in-order delivery, payload bytes, RX offsets, the
// XDP_STATISTICS counters), in each of the suite's modes as subtests:
//
//	SKB  generic XDP, copy mode, on a veth pair
//	DRV  native XDP, copy mode, on a veth pair
//	ZC   native XDP, zero-copy, on a NIC pair, each NIC in a namespace
//	     of its own and promiscuous (the frames carry the suite's MACs)
//
// ZC runs only where NIC pairs exist (test/vethns.NICPairsEnv: make
// kernels' QEMU guests, virtio_net): elsewhere no case has a ZC subtest,
// and TestZeroCopyMode checks that veth refuses zero-copy. Where the NIC
// pair's driver has no zero-copy mode, every ZC subtest ends as not
// applicable (internal/kfeature) after the library refused with
// ErrNotSupported. The cases the kernel suite keeps out of zero-copy mode
// have no ZC subtest, and log why: STAT_RX_DROPPED and
// TX_QUEUE_CONSUMER always, the multi-buffer cases (MTU 9000) where the
// driver takes one buffer per packet in zero-copy (xdp_zc_max_segs 1, as
// virtio_net does). Where the kernel lacks AF_XDP multi-buffer (before
// Linux 6.6) the multi-buffer cases end as not applicable.
//
// # Cases
//
// ZC as make kernels' Linux 6.17 guest runs it (virtio_net, one buffer
// per packet in zero-copy); "-": no ZC subtest, and why.
//
//	case                                SKB   DRV   ZC
//	SEND_RECEIVE                        pass  pass  pass
//	SEND_RECEIVE_2K_FRAME               pass  pass  pass
//	SEND_RECEIVE_SINGLE_PKT             pass  pass  pass
//	POLL_RX                             pass  pass  pass
//	POLL_TX                             pass  pass  pass
//	POLL_RXQ_FULL                       pass  pass  pass
//	POLL_TXQ_FULL                       pass  pass  pass
//	ALIGNED_INV_DESC                    pass  pass  pass
//	ALIGNED_INV_DESC_2K_FRAME_SIZE      pass  pass  pass
//	UMEM_HEADROOM                       pass  pass  pass
//	BIDIRECTIONAL                       pass  pass  pass
//	STAT_RX_DROPPED                     pass  pass  -   kernel suite: not in ZC
//	STAT_TX_INVALID                     pass  pass  pass
//	STAT_RX_FULL                        pass  pass  pass
//	STAT_FILL_EMPTY                     pass  pass  pass
//	XDP_PROG_CLEANUP                    pass  pass  pass
//	XDP_DROP_HALF                       pass  pass  pass
//	XDP_SHARED_UMEM                     pass  pass  pass
//	XDP_METADATA_COPY                   pass  pass  pass
//	XDP_METADATA_COPY_MULTI_BUFF        pass  pass  -   one buffer per packet
//	ALIGNED_INV_DESC_MULTI_BUFF         pass  pass  -   one buffer per packet
//	TOO_MANY_FRAGS                      pass  pass  -   one buffer per packet
//	XDP_ADJUST_TAIL_SHRINK              pass  pass  pass
//	TX_QUEUE_CONSUMER                   pass  pass  -   kernel suite: not in ZC
//	XDP_ADJUST_TAIL_SHRINK_MULTI_BUFF   pass  pass  -   one buffer per packet
//	XDP_ADJUST_TAIL_GROW                pass  pass  pass
//	XDP_ADJUST_TAIL_GROW_MULTI_BUFF     pass  pass  -   one buffer per packet
//	SEND_RECEIVE_9K_PACKETS             pass  pass  -   one buffer per packet
//	SEND_RECEIVE_UNALIGNED              pass  pass  pass
//	UNALIGNED_INV_DESC                  pass  pass  pass
//	UNALIGNED_INV_DESC_4001_FRAME_SIZE  pass  pass  pass
//	SEND_RECEIVE_UNALIGNED_9K_PACKETS   pass  pass  -   one buffer per packet
//	UNALIGNED_INV_DESC_MULTI_BUFF       pass  pass  -   one buffer per packet
//	HW_SW_MIN_RING_SIZE                 pass  pass  pass (veth: ErrNotSupported)
//	HW_SW_MAX_RING_SIZE                 pass  pass  -   crashed the guest kernel
//	TEARDOWN                            pass  pass  pass
//
// In ZC the sender sends the first packet of each batch alone and the
// rest once the receiver has it and gave its frames back to the Fill
// ring (or is done; a second at most). That is for the emulated device, not the kernel:
// between two batches virtio_net may have no receive buffer posted (it
// refills its ring from the Fill ring when it runs, after it received or
// from a retry half a second later, and when it last ran the receiver
// still had the frames), and QEMU's virtio-net then holds the frame that
// finds no buffer while its hub holds the next; once buffers appear the
// hub's frame is delivered first, and the first two packets of the batch
// arrive swapped (a real NIC would drop the first instead). The same
// holds right after a bind, before the driver took any buffer. The
// counts, the order and the bytes checked are the kernel suite's; a
// packet out of order fails the case and lists the packet numbers that
// arrived with it.
//
// HW_SW_MAX_RING_SIZE (virtio_net's rings at their maximum, a zero-copy
// UMEM of 8192 frames) left the 6.17 guest kernel with pages in a bad
// state ("BUG: Bad page state", then a general protection fault): it has
// no ZC subtest. The kernel suite leaves the sender's UMEM at 1024 frames
// there, fewer than its batch of 2048, so that its pacing never lets it
// send: the sender's UMEM is as large as the receiver's here.
// STAT_FILL_EMPTY in ZC: QEMU's hub keeps the frames a NIC without
// buffers cannot take, so the sender stops waiting for their completions
// once the receiver is done.
//
// In the Linux 6.1 and 6.12 guests virtio_net has no zero-copy mode
// (every ZC subtest is not applicable), 6.1 has no AF_XDP multi-buffer
// (the multi-buffer cases are not applicable), and neither publishes the
// TX consumer index when a sendto stops at its budget, which
// TX_QUEUE_CONSUMER checks (not applicable there: the kernel lacks the TX
// budget rework that brought XDP_MAX_TX_SKB_BUDGET); everything else
// passes in SKB and DRV mode.
//
// What the kernel does where its suite's expectations and the kernel
// part, and what the cases check instead:
//
//   - In copy mode the kernel may hand the frames of invalid TX
//     descriptors back on the Completion ring, and hands an odd address
//     (unaligned UMEM) back with bit 0 cleared. The sender matches every
//     completion to a frame it sent and has not seen completed, and waits
//     for all valid ones (the kernel suite only counts them).
//   - The kernel keeps room for a struct skb_shared_info at the end of
//     each chunk and refuses a headroom that leaves less than that and
//     128 bytes: STAT_RX_DROPPED's headroom is smaller by that room and
//     its long packets longer by as much.
//   - Kernels whose struct xdp_sock has the field drain_cont (their BTF
//     names it, as this machine's Linux 6.18 does) drop, in copy mode,
//     the TX descriptors that follow a multi-buffer packet dropped at a
//     descriptor with XDP_PKT_CONTD set, up to and including the next
//     descriptor without it; without the field __xsk_generic_xmit drops
//     the packet and starts a new one at the next descriptor, which the
//     kernel suite expects. On such
//     kernels ALIGNED_INV_DESC_MULTI_BUFF and UNALIGNED_INV_DESC_MULTI_BUFF
//     expect the two-frame packet after the invalid ones (which say they
//     continue: 0xffff has the bit) to be dropped, and TOO_MANY_FRAGS the
//     sync packet after the packet too long, with one more sync packet
//     after it to show that nothing else goes.
//   - bpf_xdp_adjust_tail grows a packet only into room behind it. In
//     the copy modes the frame is an skb copied into a page-pool
//     fragment sized to the packet (veth_convert_skb_to_xdp_buff and
//     netif_skb_check_for_xdp through skb_pp_cow_data), so growing fails
//     with -EINVAL for most packets (data_end past data_hard_end in
//     net/core/filter.c); a multi-buffer packet's last fragment grows only
//     where the receive queue has a frag_size, which veth's and generic
//     XDP's lack: -EOPNOTSUPP (bpf_xdp_frags_increase_tail). The kernel
//     suite's program passes those on unchanged and skips the case; it
//     keeps both grow cases out of its CI. Here the program counts each
//     refusal, drops the packet where there was no room and passes it on
//     unchanged for -EOPNOTSUPP, and the case accounts for every packet:
//     received grown (length and the program's last word checked),
//     received unchanged as counted, or dropped as counted. In ZC a frame
//     is a whole chunk, and every single-buffer packet must grow.
//
// POLL_TXQ_FULL polls the socket's descriptor (Socket.FD) for POLLOUT as
// the kernel suite does: Socket.WaitTX also wakes for completions
// waiting, so it returns at once in that state.
//
// The package has tests only. Run it as root:
//
//	go test -count=1 -v ./test/conformance/
package conformance
