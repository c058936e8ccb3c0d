package pcapfile_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/xdpkit/xdpkit/apps/internal/pcapfile"
)

type rec struct {
	t    time.Time
	data []byte
}

func records(n int) []rec {
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1700000000, 123456789)
	var out []rec
	for i := range n {
		b := make([]byte, 14+r.IntN(1500))
		for k := range b {
			b[k] = byte(r.Uint32())
		}
		out = append(out, rec{t0.Add(time.Duration(i)*time.Millisecond + time.Duration(r.IntN(1000))), b})
	}
	return out
}

// write writes recs with gopacket's pcapgo in the given format: pcap
// (microseconds), pcap-ns, or pcapng (with a resolution of 9 or 6).
func write(t testing.TB, format string, recs []rec) []byte {
	var buf bytes.Buffer
	switch format {
	case "pcap", "pcap-ns":
		w := pcapgo.NewWriter(&buf)
		if format == "pcap-ns" {
			w = pcapgo.NewWriterNanos(&buf)
		}
		if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: r.t, CaptureLength: len(r.data), Length: len(r.data)}, r.data); err != nil {
				t.Fatal(err)
			}
		}
	case "pcapng":
		intf := pcapgo.DefaultNgInterface
		intf.LinkType = layers.LinkTypeEthernet
		w, err := pcapgo.NewNgWriterInterface(&buf, intf, pcapgo.DefaultNgWriterOptions)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: r.t, CaptureLength: len(r.data), Length: len(r.data)}, r.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestRead: files written by gopacket's pcapgo, in every format it
// writes, read back packet for packet, with their timestamps at the
// file's resolution.
func TestRead(t *testing.T) {
	recs := records(500)
	for _, format := range []string{"pcap", "pcap-ns", "pcapng"} {
		t.Run(format, func(t *testing.T) {
			r, err := pcapfile.NewReader(bytes.NewReader(write(t, format, recs)))
			if err != nil {
				t.Fatal(err)
			}
			res := time.Nanosecond
			if format == "pcap" {
				res = time.Microsecond
			}
			for i, want := range recs {
				p, err := r.Next()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if !bytes.Equal(p.Data, want.data) || p.OrigLen != len(want.data) || p.LinkType != pcapfile.LinkTypeEthernet {
					t.Fatalf("packet %d: %d bytes (orig %d, link %d), want %d", i, len(p.Data), p.OrigLen, p.LinkType, len(want.data))
				}
				if got := time.Unix(0, p.Time); !got.Equal(want.t.Truncate(res)) {
					t.Fatalf("packet %d: time %v, want %v", i, got, want.t.Truncate(res))
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("after the last packet: %v, want io.EOF", err)
			}
		})
	}
}

// TestBigEndian: a big-endian pcap (as written on a big-endian host).
func TestBigEndian(t *testing.T) {
	var b bytes.Buffer
	h := make([]byte, 24)
	binary.BigEndian.PutUint32(h, 0xa1b2c3d4)
	binary.BigEndian.PutUint16(h[4:], 2)
	binary.BigEndian.PutUint16(h[6:], 4)
	binary.BigEndian.PutUint32(h[16:], 65535)
	binary.BigEndian.PutUint32(h[20:], 1)
	b.Write(h)
	rh := make([]byte, 16)
	binary.BigEndian.PutUint32(rh, 10)
	binary.BigEndian.PutUint32(rh[4:], 5)
	binary.BigEndian.PutUint32(rh[8:], 3)
	binary.BigEndian.PutUint32(rh[12:], 60)
	b.Write(rh)
	b.Write([]byte{1, 2, 3})
	r, err := pcapfile.NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Next()
	if err != nil || p.Time != 10e9+5000 || !bytes.Equal(p.Data, []byte{1, 2, 3}) || p.OrigLen != 60 {
		t.Fatalf("%+v %v", p, err)
	}
}

// TestResolution: pcapng interfaces with if_tsresol 6 (microseconds)
// and 0x8a (2^-10 s), big-endian, and a second section.
func TestResolution(t *testing.T) {
	be := binary.BigEndian
	var b bytes.Buffer
	block := func(typ uint32, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		n := uint32(12 + len(body))
		b.Write(be.AppendUint32(be.AppendUint32(nil, typ), n))
		b.Write(body)
		b.Write(be.AppendUint32(nil, n))
	}
	shb := be.AppendUint32(nil, 0x1A2B3C4D)
	shb = append(shb, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	idb := func(resol byte) []byte {
		return []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, resol, 0, 0, 0, 0, 0, 0, 0}
	}
	epb := func(iface uint32, ts uint64) []byte {
		e := be.AppendUint32(nil, iface)
		e = be.AppendUint32(e, uint32(ts>>32))
		e = be.AppendUint32(e, uint32(ts))
		e = be.AppendUint32(e, 2)
		e = be.AppendUint32(e, 2)
		return append(e, 0xaa, 0xbb)
	}
	block(0x0A0D0D0A, shb)
	block(1, idb(6))
	block(1, idb(0x8a))
	block(6, epb(0, 1_500_000))  // 1.5 s in microseconds
	block(6, epb(1, 3*1024+512)) // 3.5 s in 2^-10 s
	block(0x0A0D0D0A, shb)
	block(1, idb(9))
	block(6, epb(0, 7))
	r, err := pcapfile.NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{1.5e9, 3.5e9, 7} {
		p, err := r.Next()
		if err != nil || p.Time != want || !bytes.Equal(p.Data, []byte{0xaa, 0xbb}) {
			t.Fatalf("packet %d: %+v, %v; want time %d", i, p, err, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("at the end: %v", err)
	}
}

// TestCorrupt: truncated files and absurd lengths are ErrFormat, never
// a panic or a huge allocation.
func TestCorrupt(t *testing.T) {
	for _, format := range []string{"pcap", "pcapng"} {
		f := write(t, format, records(3))
		for cut := 1; cut < len(f); cut += 7 {
			r, err := pcapfile.NewReader(bytes.NewReader(f[:cut]))
			for err == nil {
				_, err = r.Next()
			}
			if err != io.EOF && !errors.Is(err, pcapfile.ErrFormat) {
				t.Fatalf("%s cut at %d: %v", format, cut, err)
			}
		}
	}
	f := write(t, "pcap", records(1))
	binary.LittleEndian.PutUint32(f[24+8:], 1<<30)
	r, err := pcapfile.NewReader(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, pcapfile.ErrFormat) {
		t.Errorf("a 1 GiB record: %v", err)
	}
}

func TestNoAllocs(t *testing.T) {
	f := write(t, "pcapng", records(2000))
	r, err := pcapfile.NewReader(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	r.Next()
	if n := testing.AllocsPerRun(1000, func() { r.Next() }); n != 0 {
		t.Errorf("%v allocations per packet", n)
	}
}

func BenchmarkNext(b *testing.B) {
	for _, format := range []string{"pcap", "pcapng"} {
		b.Run(format, func(b *testing.B) {
			f := write(b, format, records(1000))
			br := bytes.NewReader(f)
			r, err := pcapfile.NewReader(br)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(f) / 1000))
			for b.Loop() {
				if r.Count() == 1000 {
					br.Reset(f)
					if err := r.Reset(br); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func FuzzReader(f *testing.F) {
	f.Add(write(f, "pcap", records(2)))
	f.Add(write(f, "pcapng", records(2)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := pcapfile.NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		for range 1000 {
			p, err := r.Next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, pcapfile.ErrFormat) {
					t.Fatal(fmt.Errorf("error not ErrFormat: %w", err))
				}
				return
			}
			if len(p.Data) > pcapfile.MaxPacket {
				t.Fatal("packet above MaxPacket")
			}
		}
	})
}

// TestReset: a Reader reset onto the same file reads it again.
func TestReset(t *testing.T) {
	recs := records(10)
	f := write(t, "pcapng", recs)
	r, err := pcapfile.NewReader(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		for i := range recs {
			p, err := r.Next()
			if err != nil || !bytes.Equal(p.Data, recs[i].data) {
				t.Fatalf("round %d packet %d: %v", round, i, err)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := r.Reset(bytes.NewReader(f)); err != nil {
			t.Fatal(err)
		}
	}
}

// stream is an io.Reader of a pcap file made on the fly: a header, then
// records of 1500 bytes until size bytes; it holds no more than one record.
type stream struct {
	left int64
	cur  []byte
	rec  []byte
	hdr  bool
}

func (s *stream) Read(p []byte) (int, error) {
	if len(s.cur) == 0 {
		switch {
		case !s.hdr:
			s.hdr = true
			h := binary.LittleEndian.AppendUint32(nil, 0xa1b2c3d4)
			h = append(h, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0)
			s.cur = h
		case s.left <= 0:
			return 0, io.EOF
		default:
			s.cur = s.rec
			s.left -= int64(len(s.rec))
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// TestLargerThanMemory: a 1 GiB capture, made on the fly and never held
// whole, reads through with a few kilobytes allocated in all: the Reader
// streams.
func TestLargerThanMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 1 GiB")
	}
	rec := make([]byte, 16+1500)
	binary.LittleEndian.PutUint32(rec[8:], 1500)
	binary.LittleEndian.PutUint32(rec[12:], 1500)
	const size = 1 << 30
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	r, err := pcapfile.NewReader(&stream{left: size, rec: rec})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil || len(p.Data) != 1500 {
			t.Fatalf("packet %d: %v", n, err)
		}
		n++
	}
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("%d packets (%d MiB) read with %d KiB allocated", n, size>>20, alloc>>10)
	if want := size / len(rec); n < want || alloc > 1<<20 {
		t.Errorf("%d packets of %d, %d bytes allocated (at most 1 MiB)", n, want, alloc)
	}
}
