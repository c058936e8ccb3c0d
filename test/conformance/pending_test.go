//go:build conformance_pending

// The cases in this file do not pass on Linux 6.18; go test -tags
// conformance_pending ./test/conformance/ runs them. See doc.go.

package conformance

import (
	"testing"

	"github.com/xdpkit/xdpkit/xsk"
)

func TestALIGNED_INV_DESC_MULTI_BUFF(t *testing.T) { forModes(t, invalidDescMB) }

func TestUNALIGNED_INV_DESC_MULTI_BUFF(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
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
	tc.mtu = maxEthJumboSize
	tc.setStreams(custom(pkts))
	run(t, tc.validateTraffic())
}

// TestTOO_MANY_FRAGS: a packet of the largest number of frames the path
// takes (net.core.max_skb_frags + 1 in copy mode) arrives; one of one
// frame more, whose last descriptor still says it continues, is dropped.
func TestTOO_MANY_FRAGS(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		frags, err := readUint("/proc/sys/net/core/max_skb_frags")
		if err != nil {
			t.Fatal(err)
		}
		maxFrags := int(frags) + 1
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
		tc.mtu = maxEthJumboSize
		tc.setStreams(custom(pkts))
		run(t, tc.validateTraffic())
	})
}

func TestXDP_ADJUST_TAIL_GROW(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) { adjustTail(t, tc, 4, minPktSize*2) })
}

func TestXDP_ADJUST_TAIL_GROW_MULTI_BUFF(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.mtu = maxEthJumboSize
		// Grow by less than what the last frame has left.
		adjustTail(t, tc, maxFrameSize/2-1, largeFrameSize*2)
	})
}
