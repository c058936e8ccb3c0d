package craft

import (
	"net/netip"
	"testing"
)

// TestStepCarry: the sequential walk of an IPv6 prefix shorter than /64
// carries from the low 64 host bits into the high ones, and wraps to the
// prefix's first address after its last.
func TestStepCarry(t *testing.T) {
	b, err := New(&Config{Mode: UDP, Src: netip.MustParsePrefix("2001:db8::1/128"), Dst: netip.MustParsePrefix("2001:db8:1::/62"),
		SrcPorts: PortRange{First: 1, Last: 1}, DstPorts: PortRange{First: 1, Last: 1}, Sizes: []int{100}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, b.MaxLen())
	b.Build(buf) // the first combination
	for _, tc := range []struct{ hi, lo uint64 }{{0, ^uint64(0)}, {3, ^uint64(0)}} {
		b.idxHi[fDst], b.idx[fDst] = tc.hi, tc.lo
		b.Build(buf)
		got := netip.AddrFrom16([16]byte(buf[14+24 : 14+40]))
		want := netip.MustParseAddr("2001:db8:1:1::")
		if tc.hi == 3 {
			want = netip.MustParseAddr("2001:db8:1::") // 2^66 addresses: wrapped
		}
		if got != want {
			t.Errorf("after %d:%#x: %v, want %v", tc.hi, tc.lo, got, want)
		}
	}
}
