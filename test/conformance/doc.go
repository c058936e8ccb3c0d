// Package conformance runs the kernel's own AF_XDP test suite
// (tools/testing/selftests/bpf/prog_tests/test_xsk.c, formerly
// xskxceiver.c) against xdpkit's public API: one Go test per kernel test
// case, named after it, each checking what the kernel's version checks
// (packet counts, in-order delivery, payload bytes, RX offsets, the
// XDP_STATISTICS counters), in each of the suite's modes as subtests:
//
//	SKB  generic XDP, copy mode, on a veth pair
//	DRV  native XDP, copy mode, on a veth pair
//
// The modes are data (modes in harness_test.go); a device pair comes from
// one helper, newDevices, so another mode (zero-copy on a NIC pair) runs
// the same cases.
//
// # Cases
//
//	case                                SKB   DRV   ZC
//	SEND_RECEIVE                        pass  pass  -
//	SEND_RECEIVE_2K_FRAME               pass  pass  -
//	SEND_RECEIVE_SINGLE_PKT             pass  pass  -
//	POLL_RX                             pass  pass  -
//	POLL_TX                             pass  pass  -
//	POLL_RXQ_FULL                       pass  pass  -
//	POLL_TXQ_FULL                       pass  pass  -
//	ALIGNED_INV_DESC                    pass  pass  -
//	ALIGNED_INV_DESC_2K_FRAME_SIZE      pass  pass  -
//	UMEM_HEADROOM                       pass  pass  -
//	BIDIRECTIONAL                       pass  pass  -
//	STAT_RX_DROPPED                     pass  pass  -
//	STAT_TX_INVALID                     pass  pass  -
//	STAT_RX_FULL                        pass  pass  -
//	STAT_FILL_EMPTY                     pass  pass  -
//	XDP_PROG_CLEANUP                    pass  pass  -
//	XDP_DROP_HALF                       pass  pass  -
//	XDP_SHARED_UMEM                     pass  pass  -
//	XDP_METADATA_COPY                   pass  pass  -
//	XDP_METADATA_COPY_MULTI_BUFF        pass  pass  -
//	ALIGNED_INV_DESC_MULTI_BUFF         fail  fail  -   (pending_test.go)
//	TOO_MANY_FRAGS                      fail  fail  -   (pending_test.go)
//	XDP_ADJUST_TAIL_SHRINK              pass  pass  -
//	TX_QUEUE_CONSUMER                   pass  pass  -
//	XDP_ADJUST_TAIL_SHRINK_MULTI_BUFF   pass  pass  -
//	XDP_ADJUST_TAIL_GROW                fail  fail  -   (pending_test.go)
//	XDP_ADJUST_TAIL_GROW_MULTI_BUFF     fail  fail  -   (pending_test.go)
//	SEND_RECEIVE_9K_PACKETS             pass  pass  -
//	SEND_RECEIVE_UNALIGNED              pass  pass  -
//	UNALIGNED_INV_DESC                  pass  pass  -
//	UNALIGNED_INV_DESC_4001_FRAME_SIZE  pass  pass  -
//	SEND_RECEIVE_UNALIGNED_9K_PACKETS   pass  pass  -
//	UNALIGNED_INV_DESC_MULTI_BUFF       fail  fail  -   (pending_test.go)
//	HW_SW_MIN_RING_SIZE                 pass  pass  -   (veth: ErrNotSupported)
//	HW_SW_MAX_RING_SIZE                 pass  pass  -   (veth: ErrNotSupported)
//	TEARDOWN                            pass  pass  -
//
// What the kernel does where its suite's expectations and Linux 6.18
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
//   - After an invalid multi-buffer descriptor that has XDP_PKT_CONTD
//     set, the kernel drops the descriptors that follow up to the end of
//     that packet, which the kernel suite sends as a packet of their own
//     and expects to arrive (ALIGNED_INV_DESC_MULTI_BUFF,
//     UNALIGNED_INV_DESC_MULTI_BUFF, TOO_MANY_FRAGS).
//   - The two XDP_ADJUST_TAIL_GROW cases lose packets: not explained
//     yet. The kernel suite runs them only outside its CI.
//
// POLL_TXQ_FULL polls the socket's descriptor (Socket.FD) for POLLOUT as
// the kernel suite does: Socket.WaitTX also wakes for completions
// waiting, so it returns at once in that state. The cases in
// pending_test.go build with -tags conformance_pending.
//
// The package has tests only. Run it as root:
//
//	go test -count=1 -v ./test/conformance/
package conformance
