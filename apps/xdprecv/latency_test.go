package main

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/rxpath"
)

// stampedFrame is frame with a stamped payload (xdpgen -timestamp) sent
// at sent.
func stampedFrame(seq uint64, size int, sent int64) []byte {
	b := frame(seq, size)
	udp := b[34:]
	n := len(udp) - 8
	payload.PutStamped(udp[8:], 3, n, seq, sent)
	copy(udp[8+payload.HeaderLen+payload.StampLen:], payload.Body(payload.Pattern(2048), seq, n)[payload.StampLen:])
	binary.BigEndian.PutUint16(udp[6:], 0)
	src, dst := netip.MustParseAddr("198.18.0.1").As4(), netip.MustParseAddr("198.18.1.2").As4()
	binary.BigEndian.PutUint16(udp[6:], csum.FinishUDP(csum.Sum(udp, csum.PseudoHeaderIPv4(src, dst, 17, uint16(len(udp))))))
	return b
}

// TestReceiveLatency: stamped datagrams are checked like plain ones and
// timed by the receive clock when the packet has no RX metadata; one
// from the future is counted apart, not recorded.
func TestReceiveLatency(t *testing.T) {
	r := newReceiver()
	r.lat = newLatency(clockAuto)
	now := payload.TAINow()
	deliver(r, stampedFrame(0, 100, now-int64(2*time.Millisecond)))
	deliver(r, stampedFrame(1, 100, now-int64(time.Millisecond)))
	deliver(r, stampedFrame(2, 100, now+int64(time.Hour)))
	deliver(r, frame(3, 100)) // plain: valid, not timed
	bad := stampedFrame(4, 100, now)
	bad[99] ^= 1
	binary.BigEndian.PutUint16(bad[40:], 0) // no UDP checksum: the pattern check sees it
	deliver(r, bad)
	if r.valid.Load() != 4 || r.badData.Load() != 1 {
		t.Fatalf("valid %d, bad payload %d; want 4, 1", r.valid.Load(), r.badData.Load())
	}
	s := latencySummary([]*latency{r.lat})
	if s.Samples != 2 || s.FromUser != 3 || s.Negative != 1 {
		t.Fatalf("latency %+v; want 2 samples of 3 by the user clock, 1 negative", *s)
	}
	if s.P50Us < 1000 || s.MaxUs < 2000 || s.MaxUs > 1e6 {
		t.Errorf("p50 %v us, max %v us; want about 1 ms and 2 ms", s.P50Us, s.MaxUs)
	}
	// device/xdp clocks: a packet without RX metadata has none.
	r.lat = newLatency(clockXDP)
	deliver(r, stampedFrame(5, 100, now))
	if s := latencySummary([]*latency{r.lat}); s.Samples != 0 || s.NoClock != 1 {
		t.Errorf("xdp clock without metadata: %+v", *s)
	}
}

// BenchmarkReceiveLatency: a stamped packet with -latency costs no
// allocation (the histogram is allocated up front).
func BenchmarkReceiveLatency(b *testing.B) {
	r := newReceiver()
	r.lat = newLatency(clockAuto)
	f := stampedFrame(0, 66, payload.TAINow()) // the smallest stamped IPv4 frame
	p := &rxpath.Packet{Data: f, Segments: [][]byte{f}, Len: len(f)}
	b.ReportAllocs()
	for b.Loop() {
		r.Receive(p)
	}
	if allocs := testing.AllocsPerRun(100, func() { r.Receive(p) }); allocs != 0 {
		b.Fatalf("%v allocs per packet", allocs)
	}
	if r.lat.h.TotalCount() == 0 {
		b.Fatal("nothing recorded")
	}
}
