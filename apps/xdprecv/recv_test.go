package main

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/rxpath"
)

// frame builds what xdpgen sends: IPv4 UDP with a generator payload.
func frame(seq uint64, size int) []byte {
	pat := payload.Pattern(2048)
	b := make([]byte, size)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8], ip[9] = 63, 17
	src, dst := netip.MustParseAddr("198.18.0.1").As4(), netip.MustParseAddr("198.18.1.2").As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
	udp := b[34:]
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	n := len(udp) - 8
	payload.Put(udp[8:], 3, n, seq)
	copy(udp[8+payload.HeaderLen:], payload.Body(pat, seq, n))
	binary.BigEndian.PutUint16(udp[6:], csum.FinishUDP(csum.Sum(udp, csum.PseudoHeaderIPv4(src, dst, 17, uint16(len(udp))))))
	return b
}

func newReceiver() *receiver {
	return &receiver{pat: payload.Pattern(65536), next: make([]uint64, 65536), win: make([]uint64, 65536), ttlMin: 256, stop: func() {}}
}

func deliver(r *receiver, b []byte) {
	r.Receive(&rxpath.Packet{Data: b, Segments: [][]byte{b}, Len: len(b)})
}

func TestReceiveChecks(t *testing.T) {
	r := newReceiver()
	for _, seq := range []uint64{0, 1, 2, 5, 3, 6} { // 3 and 4 skipped, then 3 late
		deliver(r, frame(seq, 100))
	}
	if r.valid.Load() != 6 || r.gaps.Load() != 2 || r.late.Load() != 1 || r.flows != 1 || r.ttlMin != 63 {
		t.Fatalf("valid %d gaps %d late %d flows %d ttl %d", r.valid.Load(), r.gaps.Load(), r.late.Load(), r.flows, r.ttlMin)
	}
	bad := frame(7, 100)
	bad[99] ^= 0x55 // payload corrupted: the UDP checksum catches it
	deliver(r, bad)
	bad = frame(8, 100)
	bad[22]-- // TTL changed without the header checksum
	deliver(r, bad)
	if r.badUDP.Load() != 1 || r.badIP.Load() != 1 || r.valid.Load() != 6 {
		t.Fatalf("bad udp %d, bad ip %d, valid %d", r.badUDP.Load(), r.badIP.Load(), r.valid.Load())
	}
}

func TestPcap(t *testing.T) {
	var buf bytes.Buffer
	w, err := newPcapWriter(&buf, 80)
	if err != nil {
		t.Fatal(err)
	}
	f := frame(1, 100)
	ts := time.Unix(1700000000, 123456000)
	w.write(ts, f)
	w.write(ts, f[:60])
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	le := binary.LittleEndian
	if le.Uint32(b) != 0xa1b23c4d || le.Uint16(b[4:]) != 2 || le.Uint16(b[6:]) != 4 || le.Uint32(b[16:]) != 80 || le.Uint32(b[20:]) != 1 {
		t.Fatalf("global header %x", b[:24])
	}
	r := b[24:]
	if le.Uint32(r) != 1700000000 || le.Uint32(r[4:]) != 123456000 || le.Uint32(r[8:]) != 80 || le.Uint32(r[12:]) != 100 || !bytes.Equal(r[16:96], f[:80]) {
		t.Fatalf("first record %x", r[:16])
	}
	r = r[96:]
	if le.Uint32(r[8:]) != 60 || le.Uint32(r[12:]) != 60 || len(r) != 16+60 {
		t.Fatalf("second record %x, %d bytes left", r[:16], len(r))
	}
}

func BenchmarkReceive(b *testing.B) {
	r := newReceiver()
	f := frame(0, 64)
	p := &rxpath.Packet{Data: f, Segments: [][]byte{f}, Len: len(f)}
	b.ReportAllocs()
	for b.Loop() {
		r.Receive(p)
	}
	if allocs := testing.AllocsPerRun(100, func() { r.Receive(p) }); allocs != 0 {
		b.Fatalf("%v allocs per packet", allocs)
	}
}

// TestReceivePartial: a datagram whose checksum field holds the
// pseudo-header sum (offloaded, never finished) is counted as partial,
// not bad, and still delivered; one field off by a bit is bad.
func TestReceivePartial(t *testing.T) {
	r := newReceiver()
	partial := func(seq uint64) []byte {
		b := frame(seq, 200)
		udp := b[34:]
		src, dst := [4]byte(b[26:30]), [4]byte(b[30:34])
		binary.BigEndian.PutUint16(udp[6:], csum.Fold(csum.PseudoHeaderIPv4(src, dst, 17, uint16(len(udp)))))
		return b
	}
	deliver(r, partial(0))
	deliver(r, frame(1, 200))
	b := partial(2)
	b[40] ^= 1 // the field is neither right nor the pseudo-header sum
	deliver(r, b)
	if r.partialUDP.Load() != 1 || r.badUDP.Load() != 1 || r.valid.Load() != 2 {
		t.Fatalf("partial %d bad %d valid %d", r.partialUDP.Load(), r.badUDP.Load(), r.valid.Load())
	}
}

// TestDropsNotReordered: the status line's drops count what the summary
// calls lost, not reordered datagrams: a swap of two is no drop, a
// datagram that never comes is one.
func TestDropsNotReordered(t *testing.T) {
	r := newReceiver()
	m := cli.NewMeter()
	sample := func() cli.Sample { return cli.Sample{Packets: r.packets.Load(), Drops: r.drops()} }
	m.Line(sample())
	for _, seq := range []uint64{0, 2, 1, 3, 5, 4, 6} { // each pair swapped, nothing lost
		deliver(r, frame(seq, 100))
	}
	if d := r.drops(); d != 0 || r.lost() != 0 {
		t.Errorf("7 datagrams, 2 pairs swapped, none lost: drops %d, lost %d (gaps %d, late %d)", d, r.lost(), r.gaps.Load(), r.late.Load())
	}
	if l := m.Line(sample()); !strings.Contains(l, "drops 0 ") {
		t.Errorf("status line after reordering only: %q", l)
	}
	deliver(r, frame(8, 100)) // 7 skipped: lost
	if d := r.drops(); d != 1 {
		t.Errorf("one datagram skipped: drops %d, want 1", d)
	}
	if l := m.Line(sample()); !strings.Contains(l, "drops 1 ") {
		t.Errorf("status line after one loss: %q", l)
	}
}
