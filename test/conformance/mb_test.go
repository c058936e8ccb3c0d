package conformance

import "testing"

// The multi-buffer cases: MTU 9000 on both devices, sockets bound with
// XDP_USE_SG (xsk.Config.MultiBuffer), programs loaded with
// BPF_F_XDP_HAS_FRAGS.

func TestSEND_RECEIVE_9K_PACKETS(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		tc.setStreams(genStream(defaultPktCnt, maxEthJumboSize), genStream(defaultPktCnt, maxEthJumboSize))
		run(t, tc.validateTraffic())
	})
}

func TestSEND_RECEIVE_UNALIGNED_9K_PACKETS(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		tc.tx.unaligned, tc.rx.unaligned = true, true
		needHugePages(t, 4)
		tc.setStreams(genStream(defaultPktCnt, maxEthJumboSize), genStream(defaultPktCnt, maxEthJumboSize))
		run(t, tc.validateTraffic())
	})
}

func TestXDP_METADATA_COPY_MULTI_BUFF(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		tc.prog = progMetadata
		tc.rx.useMeta = true
		run(t, tc.validateTraffic())
	})
}

// adjustTail is testapp_adjust_tail: 64 packets of length pktLen; the
// program changes each one's length by value with bpf_xdp_adjust_tail.
func adjustTail(t *testing.T, tc *testSpec, value int32, pktLen uint32) {
	tc.prog, tc.adjust = progAdjustTail, value
	tc.setStreams(genStream(defaultBatchSize, pktLen), genStream(defaultBatchSize, uint32(int32(pktLen)+value)))
	run(t, tc.validateTraffic())
}

func TestXDP_ADJUST_TAIL_SHRINK(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) { adjustTail(t, tc, -4, minPktSize*2) })
}

func TestXDP_ADJUST_TAIL_SHRINK_MULTI_BUFF(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		// Shrink by a whole frame.
		adjustTail(t, tc, -maxFrameSize, largeFrameSize*2)
	})
}
