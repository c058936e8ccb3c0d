package conformance

import (
	"fmt"
	"testing"

	"github.com/xdpkit/xdpkit/xsk"
)

// The multi-buffer cases: MTU 9000 on both devices, sockets bound with
// XDP_USE_SG (xsk.Config.MultiBuffer), programs loaded with
// BPF_F_XDP_HAS_FRAGS.

func TestSEND_RECEIVE_9K_PACKETS(t *testing.T) {
	forModesMB(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		tc.setStreams(genStream(defaultPktCnt, maxEthJumboSize), genStream(defaultPktCnt, maxEthJumboSize))
		run(t, tc.validateTraffic())
	})
}

func TestSEND_RECEIVE_UNALIGNED_9K_PACKETS(t *testing.T) {
	forModesMB(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		tc.tx.unaligned, tc.rx.unaligned = true, true
		needHugePages(t, 4)
		tc.setStreams(genStream(defaultPktCnt, maxEthJumboSize), genStream(defaultPktCnt, maxEthJumboSize))
		run(t, tc.validateTraffic())
	})
}

func TestXDP_METADATA_COPY_MULTI_BUFF(t *testing.T) {
	forModesMB(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		tc.prog = progMetadata
		tc.rx.useMeta = true
		run(t, tc.validateTraffic())
	})
}

// adjustTail is testapp_adjust_tail: 64 packets of length pktLen; the
// program changes each one's length by value with bpf_xdp_adjust_tail.
//
// Growing needs tailroom behind the packet, which the copy modes do not
// promise (see doc.go): where bpf_xdp_adjust_tail refuses for lack of
// room (-EINVAL) the program counts the packet and drops it, where it
// refuses the operation (-EOPNOTSUPP) the program counts it and passes
// it on unchanged, as the kernel suite's program does. Every packet is
// then accounted for: received changed (length and last word checked),
// received unchanged as counted, or dropped as counted.
func adjustTail(t *testing.T, tc *testSpec, value int32, pktLen uint32) {
	tc.prog, tc.adjust = progAdjustTail, value
	rx := genStream(defaultBatchSize, uint32(int32(pktLen)+value))
	rx.gaps, rx.altLen = true, pktLen
	var refused, unsupported uint64
	rx.refused = func() int {
		if tc.rx.prog == nil {
			return 0
		}
		if err := tc.rx.prog.count.Lookup(uint32(countRefused), &refused); err != nil {
			return 0
		}
		return int(refused)
	}
	tc.setStreams(genStream(defaultBatchSize, pktLen), rx)
	tc.rx.valid = func(s *side) error {
		if err := s.prog.count.Lookup(uint32(countUnsupported), &unsupported); err != nil {
			return err
		}
		if err := s.prog.count.Lookup(uint32(countRefused), &refused); err != nil {
			return err
		}
		st := s.streams[0]
		if missing := st.nbValid - st.nbRx; uint64(missing) != refused {
			return fmt.Errorf("%d packets missing, the program dropped %d", missing, refused)
		}
		if uint64(st.unchanged) != unsupported {
			return fmt.Errorf("%d packets arrived unchanged, the program passed on %d refused with EOPNOTSUPP", st.unchanged, unsupported)
		}
		if tc.m.zc && pktLen+uint32(value) <= maxEthPktSize && refused+unsupported > 0 {
			// A zero-copy frame is a whole UMEM chunk: room enough.
			return fmt.Errorf("zero-copy: bpf_xdp_adjust_tail(%d) refused %d packets for lack of room, %d with EOPNOTSUPP", value, refused, unsupported)
		}
		if refused+unsupported > 0 {
			t.Logf("bpf_xdp_adjust_tail(%d): %d of %d packets refused for lack of room (dropped), %d with EOPNOTSUPP (passed on unchanged)",
				value, refused, st.nbValid, unsupported)
		}
		return nil
	}
	run(t, tc.validateTraffic())
}

func TestXDP_ADJUST_TAIL_SHRINK(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) { adjustTail(t, tc, -4, minPktSize*2) })
}

func TestXDP_ADJUST_TAIL_SHRINK_MULTI_BUFF(t *testing.T) {
	forModesMB(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		// Shrink by a whole frame.
		adjustTail(t, tc, -maxFrameSize, largeFrameSize*2)
	})
}

func TestXDP_ADJUST_TAIL_GROW(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) { adjustTail(t, tc, 4, minPktSize*2) })
}

func TestXDP_ADJUST_TAIL_GROW_MULTI_BUFF(t *testing.T) {
	forModesMB(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		// Grow by less than what the last frame has left.
		adjustTail(t, tc, maxFrameSize/2-1, largeFrameSize*2)
	})
}

func TestALIGNED_INV_DESC_MULTI_BUFF(t *testing.T) { forModesMB(t, invalidDescMB) }

func TestUNALIGNED_INV_DESC_MULTI_BUFF(t *testing.T) {
	forModesMB(t, func(t *testing.T, tc *testSpec) {
		tc.tx.unaligned, tc.rx.unaligned = true, true
		needHugePages(t, 4)
		invalidDescMB(t, tc)
	})
}

// invalidDescMB is testapp_invalid_desc_mb: multi-buffer packets with
// an invalid descriptor somewhere in them are dropped whole.
func invalidDescMB(t *testing.T, tc *testSpec) {
	size := int64(tc.tx.umemSize())
	pkts := []pkt{
		{offset: 0, len: minPktSize, valid: true}, // valid packet for sync
		// A zero-length frame is not legal.
		{offset: 0, len: largeFrameSize, options: xsk.OptContd},
		{offset: 0, len: largeFrameSize, options: xsk.OptContd},
		{offset: 0, len: 0},
		// An invalid address in the second frame.
		{offset: 0, len: largeFrameSize, options: xsk.OptContd},
		{offset: size, len: largeFrameSize, options: xsk.OptContd},
		// An invalid length in the middle.
		{offset: 0, len: largeFrameSize, options: xsk.OptContd},
		{offset: 0, len: invalidFrameSize, options: xsk.OptContd},
		// Invalid options in the middle.
		{offset: 0, len: largeFrameSize, options: xsk.OptContd},
		{offset: 0, len: largeFrameSize, options: invalidOption},
		// Two frames sent, three received.
		{offset: 0, len: maxFrameSize, valid: true, options: xsk.OptContd},
		{offset: 0, len: maxFrameSize, valid: true},
		// The middle frame crosses a chunk boundary with a small length.
		{offset: 0, len: largeFrameSize, options: xsk.OptContd},
		{offset: -minPktSize / 2, len: minPktSize},
		{offset: 0, len: minPktSize, valid: true}, // valid packet for sync
	}
	if tc.tx.unaligned {
		// Crossing a chunk boundary is allowed.
		pkts[12].valid, pkts[13].valid = true, true
	}
	if !tc.m.zc && drainsAfterInvalid(t) {
		// The invalid address (frame 5) has XDP_PKT_CONTD: the kernel
		// drops what follows up to the end of that packet, which, the
		// invalid frames 7 and 9 saying they continue too (0xffff has
		// the bit), is frame 11: the two-frame packet never leaves.
		pkts[10].valid, pkts[11].valid = false, false
	}
	tc.mtu = maxEthJumboSize
	tc.setStreams(custom(pkts))
	run(t, tc.validateTraffic())
}

// TestTOO_MANY_FRAGS: a packet of the largest number of frames the path
// takes (net.core.max_skb_frags + 1 in copy mode) arrives; one of one
// frame more, whose last descriptor still says it continues, is dropped.
func TestTOO_MANY_FRAGS(t *testing.T) {
	forModesMB(t, func(t *testing.T, tc *testSpec) {
		frags, err := readUint("/proc/sys/net/core/max_skb_frags")
		if err != nil {
			t.Fatal(err)
		}
		maxFrags := int(frags) + 1
		if tc.m.zc {
			maxFrags = int(probeZC(t).maxSegs)
		}
		pkts := make([]pkt, 2*maxFrags+2)
		pkts[0] = pkt{len: minPktSize, valid: true}
		for i := 1; i <= maxFrags; i++ {
			pkts[i] = pkt{len: minPktSize, valid: true, options: xsk.OptContd}
		}
		pkts[maxFrags].options = 0
		for i := maxFrags + 1; i <= 2*maxFrags; i++ {
			pkts[i] = pkt{len: minPktSize, options: xsk.OptContd}
		}
		pkts[2*maxFrags+1] = pkt{len: minPktSize, valid: true}
		if !tc.m.zc && drainsAfterInvalid(t) {
			// The packet too long is dropped at a descriptor with
			// XDP_PKT_CONTD: the kernel drops what follows up to the
			// end of that packet, the sync packet. One more shows that
			// nothing else was lost.
			pkts[2*maxFrags+1].valid = false
			pkts = append(pkts, pkt{len: minPktSize, valid: true})
		}
		tc.mtu = maxEthJumboSize
		tc.setStreams(custom(pkts))
		run(t, tc.validateTraffic())
	})
}
