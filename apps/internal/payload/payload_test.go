package payload

import "testing"

func TestRoundTrip(t *testing.T) {
	pat := Pattern(2000)
	for _, n := range []int{16, 17, 100, 1472, 2000} {
		for _, seq := range []uint64{0, 1, 239, 240, 255, 256, 1<<40 + 3} {
			b := make([]byte, n)
			Put(b, 7, n, seq)
			copy(b[HeaderLen:], Body(pat, seq, n))
			h, ok := Parse(b)
			if !ok || h.Flow != 7 || h.Seq != seq || int(h.Size) != n {
				t.Fatalf("n %d seq %d: parse %+v %v", n, seq, h, ok)
			}
			for k := HeaderLen; k < n; k++ {
				if b[k] != byte(seq+uint64(k)) {
					t.Fatalf("n %d seq %d: byte %d is %d", n, seq, k, b[k])
				}
			}
			if !Check(pat, b, h) {
				t.Fatalf("n %d seq %d: check failed", n, seq)
			}
			if n > HeaderLen {
				b[n-1] ^= 1
				if Check(pat, b, h) {
					t.Fatalf("n %d seq %d: corruption not seen", n, seq)
				}
			}
			if Check(pat, b[:n-1], h) {
				t.Fatalf("n %d seq %d: truncation not seen", n, seq)
			}
		}
	}
	if _, ok := Parse(make([]byte, 20)); ok {
		t.Fatal("zero payload parsed")
	}
}
