package payload

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestStampedRoundTrip(t *testing.T) {
	pat := Pattern(2000)
	for _, n := range []int{24, 25, 100, 1472} {
		b := make([]byte, n)
		PutStamped(b, 9, n, 300, 123456789)
		copy(b[HeaderLen+StampLen:], Body(pat, 300, n)[StampLen:])
		h, sent, stamped, ok := ParseAny(b)
		if !ok || !stamped || sent != 123456789 || h.Flow != 9 || h.Seq != 300 || int(h.Size) != n {
			t.Fatalf("n=%d: ParseAny = %+v, %d, %v, %v", n, h, sent, stamped, ok)
		}
		if !CheckStamped(pat, b, h) {
			t.Errorf("n=%d: CheckStamped false", n)
		}
		if Check(pat, b, h) && n > HeaderLen+StampLen {
			t.Errorf("n=%d: a stamped payload passes the plain Check", n)
		}
		if n == HeaderLen+StampLen {
			continue // no pattern to change
		}
		b[n-1]++
		if CheckStamped(pat, b, h) {
			t.Errorf("n=%d: CheckStamped misses a changed byte", n)
		}
	}
	b := make([]byte, 40)
	Put(b, 1, 40, 2)
	if _, _, stamped, ok := ParseAny(b); !ok || stamped {
		t.Errorf("plain payload: stamped %v, ok %v", stamped, ok)
	}
}

func TestTAINow(t *testing.T) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_TAI, &ts); err != nil {
		t.Fatal(err)
	}
	if d := TAINow() - ts.Nano(); d < 0 || d > int64(time.Second) {
		t.Errorf("TAINow - CLOCK_TAI = %v", time.Duration(d))
	}
}
