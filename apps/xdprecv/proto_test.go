package main

import (
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/rxpath"
)

var (
	src4, dst4 = netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.1.2")
	src6, dst6 = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:1::2")
)

// ipFrame builds an Ethernet frame carrying an IPv4 or IPv6 packet of
// protocol proto around l4 (whose checksum the caller fills with fill,
// given the pseudo-header sum).
func ipFrame(v6 bool, proto uint8, l4 []byte, fill func(seg []byte, ph uint32)) []byte {
	var b []byte
	if !v6 {
		b = make([]byte, 34+len(l4))
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:34]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		ip[8], ip[9] = 64, proto
		s, d := src4.As4(), dst4.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
		seg := b[34:]
		copy(seg, l4)
		if fill != nil {
			fill(seg, csum.PseudoHeaderIPv4(s, d, proto, uint16(len(seg))))
		}
		return b
	}
	b = make([]byte, 54+len(l4))
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:54]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
	ip[6], ip[7] = proto, 64
	s, d := src6.As16(), dst6.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	seg := b[54:]
	copy(seg, l4)
	if fill != nil {
		fill(seg, csum.PseudoHeaderIPv6(s, d, proto, uint32(len(seg))))
	}
	return b
}

func synFrame(v6 bool, sport, dport uint16, flags byte) []byte {
	tcp := make([]byte, 24) // with an MSS option
	binary.BigEndian.PutUint16(tcp, sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], 12345)
	tcp[12] = 6 << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	tcp[20], tcp[21] = 2, 4
	binary.BigEndian.PutUint16(tcp[22:], 1460)
	return ipFrame(v6, 6, tcp, func(seg []byte, ph uint32) {
		binary.BigEndian.PutUint16(seg[16:], csum.Checksum(seg, ph))
	})
}

func echoFrame(v6 bool, typ byte, id, seq uint16) []byte {
	icmp := make([]byte, 16)
	icmp[0] = typ
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	copy(icmp[8:], "xdpkit!!")
	proto := uint8(1)
	if v6 {
		proto = 58
	}
	return ipFrame(v6, proto, icmp, func(seg []byte, ph uint32) {
		if !v6 {
			ph = 0 // ICMPv4 has no pseudo-header
		}
		binary.BigEndian.PutUint16(seg[2:], csum.Checksum(seg, ph))
	})
}

func rawFrame(et uint16) []byte {
	b := make([]byte, 60)
	binary.BigEndian.PutUint16(b[12:], et)
	for i := 14; i < len(b); i++ {
		b[i] = byte(i)
	}
	return b
}

func protoReceiver() *receiver {
	r := newReceiver()
	r.proto = newProtoCounters()
	return r
}

func protoSummary(r *receiver) ProtoSummary {
	var s ProtoSummary
	s.add(r.proto)
	return s
}

// TestReceiveProto: SYNs, SYN-ACKs, echoes and raw frames are counted by
// kind and flow; a bad checksum is counted bad and nothing else; none of
// them is "other".
func TestReceiveProto(t *testing.T) {
	r := protoReceiver()
	for _, v6 := range []bool{false, true} {
		for sport := uint16(1000); sport < 1010; sport++ {
			deliver(r, synFrame(v6, sport, 80, 0x02))
			deliver(r, synFrame(v6, sport, 80, 0x02)) // a retransmission: same flow
		}
		deliver(r, synFrame(v6, 80, 1000, 0x12))
		deliver(r, synFrame(v6, 1000, 80, 0x10))
		for seq := range uint16(5) {
			req, rep := byte(8), byte(0)
			if v6 {
				req, rep = 128, 129
			}
			deliver(r, echoFrame(v6, req, 7, seq))
			deliver(r, echoFrame(v6, rep, 7, seq))
		}
	}
	for range 3 {
		deliver(r, rawFrame(0x88b5))
	}
	deliver(r, rawFrame(0x0806))
	bad := synFrame(false, 1, 2, 0x02)
	bad[len(bad)-1] ^= 1
	deliver(r, bad)
	bad = echoFrame(true, 128, 1, 1)
	bad[len(bad)-1] ^= 1
	deliver(r, bad)
	bad = echoFrame(false, 8, 1, 1)
	bad[22]-- // the TTL without the IPv4 header checksum
	deliver(r, bad)

	got := protoSummary(r)
	want := ProtoSummary{TCPSYN: 40, TCPSYNACK: 2, TCPOther: 2, TCPSYNFlows: 20, TCPBadCsum: 1,
		ICMPEchoRequest: 5, ICMPEchoReply: 5, ICMPv6EchoRequest: 5, ICMPv6EchoReply: 5, ICMPEchoFlows: 4, ICMPBadCsum: 2,
		Raw: map[string]uint64{"0x88b5": 3, "0x0806": 1}}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("counts\n got %s\nwant %s", gj, wj)
	}
	if r.other.Load() != 0 || r.valid.Load() != 0 {
		t.Errorf("other %d, valid %d: want 0", r.other.Load(), r.valid.Load())
	}
	// Without proto counters (UDP only) they are all "other".
	u := newReceiver()
	deliver(u, synFrame(false, 1, 2, 0x02))
	deliver(u, rawFrame(0x88b5))
	if u.other.Load() != 2 {
		t.Errorf("UDP-only receiver: other %d, want 2", u.other.Load())
	}
}

// TestTCPPartialChecksum: a TCP checksum field holding the pseudo-header
// sum is partial, not bad.
func TestTCPPartialChecksum(t *testing.T) {
	r := protoReceiver()
	f := synFrame(false, 1, 2, 0x02)
	seg := f[34:]
	s, d := src4.As4(), dst4.As4()
	binary.BigEndian.PutUint16(seg[16:], csum.Fold(csum.PseudoHeaderIPv4(s, d, 6, uint16(len(seg)))))
	deliver(r, f)
	if got := protoSummary(r); got.TCPPartialCsum != 1 || got.TCPBadCsum != 0 || got.TCPSYN != 1 {
		t.Errorf("partial %d bad %d syn %d: want 1 0 1", got.TCPPartialCsum, got.TCPBadCsum, got.TCPSYN)
	}
}

// TestDuplicates: a sequence number seen twice is a duplicate, not a
// reordering, and does not hide a loss.
func TestDuplicates(t *testing.T) {
	r := newReceiver()
	for _, seq := range []uint64{0, 1, 1, 3, 2, 2, 5, 0, 70, 6} {
		deliver(r, frame(seq, 100))
	}
	// Late: 1 (dup), 2 (reordered), 2 (dup), 0 (dup), 6 (reordered).
	// Gaps: 2 (after 1), 4 (after 3), 6..69 (64 after 5). Lost: gaps
	// 66 - reordered 2 = 64 (4 and 7..69).
	if r.late.Load() != 5 || r.dups.Load() != 3 || r.lost() != 64 {
		t.Errorf("late %d dups %d lost %d: want 5 3 64 (gaps %d)", r.late.Load(), r.dups.Load(), r.lost(), r.gaps.Load())
	}
}

// TestProtoNoAllocs: counting a SYN, an echo and a raw frame allocates
// nothing.
func TestProtoNoAllocs(t *testing.T) {
	r := protoReceiver()
	var ps []*rxpath.Packet
	for _, f := range [][]byte{synFrame(false, 1, 2, 0x02), echoFrame(true, 128, 1, 1), rawFrame(0x88b5)} {
		ps = append(ps, &rxpath.Packet{Data: f, Segments: [][]byte{f}, Len: len(f)})
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, p := range ps {
			r.Receive(p)
		}
	}); n != 0 {
		t.Errorf("%v allocations per round", n)
	}
}

// TestFlowTableFull: the flow table stops counting at three quarters of
// its slots and says so.
func TestFlowTableFull(t *testing.T) {
	r := protoReceiver()
	for i := range flowSlots {
		deliver(r, synFrame(false, uint16(i), uint16(i>>16)+1, 0x02))
	}
	got := protoSummary(r)
	if got.TCPSYNFlows != flowSlots*3/4 || !got.FlowsFull || got.TCPSYN != flowSlots {
		t.Errorf("flows %d full %v syns %d: want %d true %d", got.TCPSYNFlows, got.FlowsFull, got.TCPSYN, flowSlots*3/4, flowSlots)
	}
}

// TestInterval: an interval line holds the differences of the totals,
// Lost may go down.
func TestInterval(t *testing.T) {
	prev := totals{packets: 100, bytes: 6400, valid: 90, lost: 5, late: 2, dups: 1, proto: &ProtoSummary{TCPSYN: 3, Raw: map[string]uint64{"0x88b5": 1}}}
	cur := totals{packets: 300, bytes: 19200, valid: 290, lost: 3, late: 6, dups: 2, badCsum: 1, proto: &ProtoSummary{TCPSYN: 10, Raw: map[string]uint64{"0x88b5": 4, "0x0806": 2}}}
	iv := cur.interval(&prev, 2*time.Second)
	if iv.Packets != 200 || iv.PPS != 100 || iv.Valid != 200 || iv.Lost != -2 || iv.Reordered != 3 || iv.Duplicates != 1 ||
		iv.BadCsum != 1 || iv.Total != 300 || iv.Mbps != 12800*8/2/1e6 {
		t.Errorf("interval %+v", iv)
	}
	if iv.Proto == nil || iv.Proto.TCPSYN != 7 || iv.Proto.Raw["0x88b5"] != 3 || iv.Proto.Raw["0x0806"] != 2 {
		t.Errorf("proto %+v", iv.Proto)
	}
}

// TestIntervalLatency: the -json stream's latency is that of the
// interval's samples only: merged from the queues, then reset.
func TestIntervalLatency(t *testing.T) {
	var lats []*latency
	now := payload.TAINow()
	for q := range 2 {
		r := newReceiver()
		r.lat = newLatency(clockUser)
		r.lat.iv = hdrhistogram.New(latMin, latMax, latDigits)
		lats = append(lats, r.lat)
		for i := range 10 {
			deliver(r, stampedFrame(uint64(i), 100, now-int64(q+1)*int64(time.Second)))
		}
	}
	h := hdrhistogram.New(latMin, latMax, latDigits)
	il := intervalLatency(lats, h)
	// Receive time is the user clock, a little after now: one queue's
	// samples are just over 1 s, the other's just over 2 s.
	if il == nil || il.Samples != 20 || il.P50Us < 1e6 || il.P50Us > 1.5e6 || il.MaxUs < 2e6 || il.MaxUs > 2.5e6 {
		t.Fatalf("first interval: %+v", il)
	}
	if il := intervalLatency(lats, h); il.Samples != 0 {
		t.Errorf("second interval, nothing received: %+v", il)
	}
	if s := latencySummary(lats); s.Samples != 20 {
		t.Errorf("the run's summary lost samples to the intervals: %+v", s)
	}
	if intervalLatency(nil, h) != nil {
		t.Error("no -latency: want no interval latency")
	}
}

// BenchmarkReceiveProto: a TCP SYN, an ICMPv6 echo request and a raw
// frame counted, per packet.
func BenchmarkReceiveProto(b *testing.B) {
	r := protoReceiver()
	var ps []*rxpath.Packet
	for _, f := range [][]byte{synFrame(false, 1, 2, 0x02), echoFrame(true, 128, 1, 1), rawFrame(0x88b5)} {
		ps = append(ps, &rxpath.Packet{Data: f, Segments: [][]byte{f}, Len: len(f)})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Receive(ps[i%len(ps)])
		i++
	}
}
