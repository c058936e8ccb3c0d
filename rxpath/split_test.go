package rxpath

import (
	"encoding/binary"
	"testing"

	"github.com/xdpkit/xdpkit/xsk"
)

func TestSplitPacket(t *testing.T) {
	const size, fs = 4 * 4096, 4096
	c := uint32(xsk.OptContd)
	chain := func(n int) []xsk.Desc {
		d := make([]xsk.Desc, n)
		for i := range d {
			d[i] = xsk.Desc{Addr: uint64(i%4) * fs, Len: 100, Options: c}
		}
		d[n-1].Options = 0
		return d
	}
	for _, tc := range []struct {
		name  string
		descs []xsk.Desc
		n     int
		v     Verdict
	}{
		{"empty", nil, 0, Partial},
		{"one", []xsk.Desc{{Addr: 256, Len: 1500}}, 1, Whole},
		{"frame end", []xsk.Desc{{Addr: 3*fs + 256, Len: fs - 256}}, 1, Whole},
		{"across frame end", []xsk.Desc{{Addr: 3*fs + 256, Len: fs - 255}}, 1, OutOfBounds},
		{"past umem", []xsk.Desc{{Addr: size, Len: 0}}, 1, OutOfBounds},
		{"huge addr", []xsk.Desc{{Addr: ^uint64(0), Len: 1}}, 1, OutOfBounds},
		{"huge len", []xsk.Desc{{Addr: 0, Len: ^uint32(0)}}, 1, OutOfBounds},
		{"two packets", []xsk.Desc{{Addr: 0, Len: 60}, {Addr: fs, Len: 60}}, 1, Whole},
		{"chain", chain(3), 3, Whole},
		{"partial", chain(3)[:2], 2, Partial},
		{"bad in chain", append(chain(2)[:1], xsk.Desc{Addr: size + 5, Len: 1}), 2, OutOfBounds},
		{"longest", chain(MaxSegments), MaxSegments, Whole},
		{"too long", chain(MaxSegments + 1), MaxSegments, TooLong},
	} {
		n, v := SplitPacket(tc.descs, size, fs)
		if n != tc.n || v != tc.v {
			t.Errorf("%s: got (%d, %v), want (%d, %v)", tc.name, n, v, tc.n, tc.v)
		}
	}
}

// FuzzSplitPacket checks SplitPacket against a direct reading of its
// contract, on descriptors decoded from the fuzzer's bytes.
func FuzzSplitPacket(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 1, 0, 0, 0}, uint32(4), false)
	f.Add(make([]byte, 64), uint32(1), true)
	f.Fuzz(func(t *testing.T, raw []byte, frames uint32, small bool) {
		fs := uint32(4096)
		if small {
			fs = 2048
		}
		size := uint64(frames%1024) * uint64(fs)
		var descs []xsk.Desc
		for len(raw) >= 16 {
			descs = append(descs, xsk.Desc{
				Addr:    binary.LittleEndian.Uint64(raw),
				Len:     binary.LittleEndian.Uint32(raw[8:]),
				Options: binary.LittleEndian.Uint32(raw[12:]) & 3,
			})
			raw = raw[16:]
		}
		n, v := SplitPacket(descs, size, fs)
		if n < 0 || n > len(descs) || n > MaxSegments {
			t.Fatalf("n = %d for %d descriptors", n, len(descs))
		}
		if len(descs) > 0 && n == 0 {
			t.Fatalf("no progress on %d descriptors", len(descs))
		}
		for i := 0; i < n-1; i++ {
			if descs[i].Options&xsk.OptContd == 0 {
				t.Fatalf("packet of %d ends early at %d", n, i)
			}
		}
		ends := n > 0 && descs[n-1].Options&xsk.OptContd == 0
		ok := true
		for _, d := range descs[:n] {
			base := d.Addr &^ uint64(fs-1)
			if d.Addr >= size || d.Addr+uint64(d.Len) > base+uint64(fs) || d.Addr+uint64(d.Len) < d.Addr {
				ok = false
			}
		}
		switch v {
		case Whole:
			if !ends || !ok {
				t.Fatalf("whole: ends %v, in bounds %v", ends, ok)
			}
		case OutOfBounds:
			if !ends || ok {
				t.Fatalf("out of bounds: ends %v, in bounds %v", ends, ok)
			}
		case Partial:
			if ends || n != len(descs) || n >= MaxSegments {
				t.Fatalf("partial: ends %v, n %d of %d", ends, n, len(descs))
			}
		case TooLong:
			if ends || n != MaxSegments {
				t.Fatalf("too long: ends %v, n %d", ends, n)
			}
		}
	})
}
