package csum

import (
	"encoding/binary"
	"testing"
)

// udpFrame builds an Ethernet + IPv4 or IPv6 + UDP frame with n bytes of
// data and fills its checksums.
func udpFrame(t *testing.T, v6 bool, n int) ([]byte, []byte) {
	t.Helper()
	l3 := 14
	ipLen := 20
	if v6 {
		ipLen = 40
	}
	f := make([]byte, l3+ipLen+8+n)
	ip := f[l3:]
	if v6 {
		binary.BigEndian.PutUint16(f[12:], etherTypeIPv6)
		ip[0] = 6 << 4
		binary.BigEndian.PutUint16(ip[4:], uint16(8+n))
		ip[6], ip[7] = ProtoUDP, 64
		copy(ip[8:], []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1})
		copy(ip[24:], []byte{0x20, 0x01, 0x0d, 0xb8, 15: 2})
	} else {
		binary.BigEndian.PutUint16(f[12:], etherTypeIPv4)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+n))
		ip[8], ip[9] = 64, ProtoUDP
		copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	}
	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+n))
	for i := range n {
		udp[8+i] = byte(i*7 + 3)
	}
	if err := FillFrame(f); err != nil {
		t.Fatal(err)
	}
	return f, udp
}

func TestVerify(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, n := range []int{0, 1, 17, 1000} {
			f, udp := udpFrame(t, v6, n)
			if v, err := VerifyFrame(f); v != Good || err != nil {
				t.Errorf("v6 %v n %d: filled frame: %s %v", v6, n, v, err)
			}
			// What an offloading sender leaves: the pseudo-header sum.
			_, _, pseudo, err := transport(f[14:])
			if err != nil {
				t.Fatal(err)
			}
			binary.BigEndian.PutUint16(udp[6:], Fold(pseudo))
			if v, _ := VerifyFrame(f); v != Partial {
				t.Errorf("v6 %v n %d: pseudo-header sum in the field: %s, want partial", v6, n, v)
			}
			if v := VerifyUDP(udp, pseudo); v != Partial {
				t.Errorf("VerifyUDP: %s, want partial", v)
			}
			// Its complement is a wrong checksum, not a partial one
			// (unless it is 0 or 0xFFFF, one number in ones' complement).
			if p := Fold(pseudo); p != 0 && p != 0xffff {
				binary.BigEndian.PutUint16(udp[6:], ^p)
				if v := VerifyUDP(udp, pseudo); v == Partial {
					t.Errorf("v6 %v n %d: complement of the pseudo-header sum in the field: partial", v6, n)
				}
				binary.BigEndian.PutUint16(udp[6:], p)
			}
			// Finishing it makes it good again.
			if err := FillFrame(f); err != nil {
				t.Fatal(err)
			}
			if v, _ := VerifyFrame(f); v != Good {
				t.Errorf("finished: %s", v)
			}
			// Anything else is bad.
			for _, d := range []uint16{1, 0x100, 0x8000} {
				g, _ := udpFrame(t, v6, n)
				c := binary.BigEndian.Uint16(g[len(g)-8-n+6:])
				binary.BigEndian.PutUint16(g[len(g)-8-n+6:], c^d)
				if v, _ := VerifyFrame(g); v != Bad {
					t.Errorf("v6 %v n %d: field flipped by %#x: %s, want bad", v6, n, d, v)
				}
			}
		}
	}
	f, udp := udpFrame(t, false, 10)
	udp[6], udp[7] = 0, 0
	if v, _ := VerifyFrame(f); v != None {
		t.Errorf("zero UDP checksum over IPv4: %s, want none", v)
	}
	if _, err := VerifyFrame(f[:20]); err == nil {
		t.Error("truncated frame: no error")
	}
}

// FuzzVerify: VerifyFrame never panics and agrees with FillFrame: a frame
// FillFrame accepts verifies Good afterwards, and Partial once its field
// holds the pseudo-header sum.
func FuzzVerify(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		for _, n := range []int{0, 1, 100} {
			fr, _ := udpFrame(&testing.T{}, v6, n)
			f.Add(fr)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		VerifyFrame(b)
		fr := append([]byte(nil), b...)
		if FillFrame(fr) != nil {
			return
		}
		p, err := ipPayload(fr)
		if err != nil {
			t.Fatalf("FillFrame accepted what ipPayload refuses: %v", err)
		}
		seg, proto, pseudo, err := transport(p)
		if err != nil {
			t.Fatalf("FillFrame accepted what transport refuses: %v", err)
		}
		if v, err := VerifyFrame(fr); err != nil || v != Good {
			t.Fatalf("after FillFrame: %s %v", v, err)
		}
		field := 6
		if proto == ProtoTCP {
			field = 16
		}
		binary.BigEndian.PutUint16(seg[field:], Fold(pseudo))
		if v, _ := VerifyFrame(fr); v != Partial && v != Good {
			// Good only when the segment sums to zero with its field at
			// the pseudo-header sum (a right checksum equal to it).
			t.Fatalf("pseudo-header sum in the field: %s", v)
		}
	})
}
