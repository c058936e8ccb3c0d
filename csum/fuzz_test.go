package csum

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzSum checks Sum, CopyAndSum and Combine of every kernel set against
// the byte-pair reference, on fuzzer data at a fuzzer-chosen offset and
// split point.
func FuzzSum(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint16(0), uint8(0), uint16(3))
	f.Add(bytes.Repeat([]byte{0xff}, 300), uint16(0xffff), uint8(5), uint16(77))
	f.Add(make([]byte, 129), uint16(0), uint8(1), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, init uint16, off uint8, split uint16) {
		o := int(off % 8)
		buf := make([]byte, o+len(data))
		b := buf[o:]
		copy(b, data)
		want := refSum(b, init)
		sp := 0
		if len(b) > 0 {
			sp = int(split) % (len(b) + 1)
		}
		for _, im := range impls {
			restore := im.use()
			if got := Fold(Sum(b, uint32(init))); got != want {
				restore()
				t.Fatalf("%s: Sum(len %d, off %d) = %#x, want %#x", im.name, len(b), o, got, want)
			}
			dst := make([]byte, len(b)+o)
			if got := Fold(CopyAndSum(dst[o:], b, uint32(init))); got != want || !bytes.Equal(dst[o:], b) {
				restore()
				t.Fatalf("%s: CopyAndSum(len %d, off %d) = %#x, want %#x", im.name, len(b), o, got, want)
			}
			s := Sum(b[:sp], uint32(init))
			s = Combine(s, CopyAndSum(dst[o:], b[sp:], 0), sp)
			if got := Fold(s); got != want {
				restore()
				t.Fatalf("%s: split at %d of %d: %#x, want %#x", im.name, sp, len(b), got, want)
			}
			restore()
		}
	})
}

// FuzzUpdate: an incremental update equals a full recomputation, for a
// 16-bit, a 32-bit and a 16-byte field.
func FuzzUpdate(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2}, uint8(8), uint32(0x3f11_0000), []byte("0123456789abcdef"))
	f.Add([]byte{0x55, 0x55, 0x32, 0x85}, uint8(0), uint32(0x3285_5555), []byte{})
	f.Fuzz(func(t *testing.T, data []byte, at uint8, nw uint32, nw16 []byte) {
		b := bytes.Clone(data)
		if len(b)&1 != 0 {
			b = append(b, 0)
		}
		if len(b) < 2 {
			return
		}
		allZero := func() bool { return !bytes.ContainsFunc(b, func(r rune) bool { return r != 0 }) }
		// Full recomputation of an all-zero block gives +0 (0xFFFF) where
		// any incremental form gives -0: real headers are never all zero.
		check := func(what string, got uint16) {
			t.Helper()
			want := Checksum(b, 0)
			if allZero() {
				return
			}
			if got != want {
				t.Fatalf("%s: incremental %#x, recomputed %#x", what, got, want)
			}
		}
		off := 2 * (int(at) % (len(b) / 2))
		c := Checksum(b, 0)
		old16 := binary.BigEndian.Uint16(b[off:])
		binary.BigEndian.PutUint16(b[off:], uint16(nw))
		check("Update16", Update16(c, old16, uint16(nw)))
		if off+4 <= len(b) {
			c = Checksum(b, 0)
			old32 := binary.BigEndian.Uint32(b[off:])
			binary.BigEndian.PutUint32(b[off:], nw)
			check("Update32", Update32(c, old32, nw))
		}
		n := min(len(nw16)&^1, len(b)-off)
		if n > 0 {
			c = Checksum(b, 0)
			old := bytes.Clone(b[off : off+n])
			copy(b[off:], nw16[:n])
			check("Update", Update(c, old, b[off:off+n]))
		}
	})
}

// FuzzFillFrame: FillFrame never panics, and whatever it accepts verifies
// with the reference.
func FuzzFillFrame(f *testing.F) {
	f.Add(testFrameUDP4(60))
	f.Add(testFrameUDP4(1514))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if err := FillFrame(frame); err != nil {
			return
		}
		p, err := ipPayload(frame)
		if err != nil {
			t.Fatalf("FillFrame accepted a frame ipPayload rejects: %v", err)
		}
		var seg, pseudo []byte
		if p[0]>>4 == 4 {
			ihl := int(p[0]&15) * 4
			if ^refSum(p[:ihl], 0) != 0 {
				t.Fatal("IPv4 header does not verify")
			}
			seg = p[ihl:binary.BigEndian.Uint16(p[2:])]
			pseudo = append(append(append([]byte{}, p[12:20]...), 0, p[9]), byte(len(seg)>>8), byte(len(seg)))
		} else {
			seg = p[40 : 40+int(binary.BigEndian.Uint16(p[4:]))]
			pseudo = append(append([]byte{}, p[8:40]...), 0, 0, byte(len(seg)>>8), byte(len(seg)), 0, 0, 0, p[6])
		}
		if ^refSum(append(pseudo, seg...), 0) != 0 {
			t.Fatal("transport checksum does not verify")
		}
	})
}
