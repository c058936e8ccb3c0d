package nexthop

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	calls := 0
	bad := netip.MustParseAddr("198.18.0.9")
	c := NewCache()
	c.Resolve = func(a netip.Addr) (Hop, error) {
		calls++
		if a == bad {
			return Hop{}, ErrNoNeighbour
		}
		return Hop{LinkIndex: 3, Gateway: a, MAC: [6]byte{2, 0, 0, 0, 0, byte(calls)}}, nil
	}
	good := netip.MustParseAddr("198.18.0.1")
	now := time.Now().UnixNano()
	h1, err := c.Get(good, now)
	if err != nil || h1.LinkIndex != 3 {
		t.Fatal(h1, err)
	}
	h2, _ := c.Get(good, now+int64(time.Second))
	if h2 != h1 || calls != 1 {
		t.Fatalf("cached lookup resolved again: %d calls", calls)
	}
	h3, _ := c.Get(good, now+int64(3*time.Second))
	if calls != 2 || h3.MAC == h1.MAC {
		t.Fatalf("expired entry not resolved again: %d calls", calls)
	}
	if _, err := c.Get(bad, now); !errors.Is(err, ErrNoNeighbour) {
		t.Fatal(err)
	}
	if _, err := c.Get(bad, now+int64(50*time.Millisecond)); !errors.Is(err, ErrNoNeighbour) || calls != 3 {
		t.Fatalf("negative entry: %v, %d calls", err, calls)
	}
	if _, _ = c.Get(bad, now+int64(time.Second)); calls != 4 {
		t.Fatalf("negative entry not expired: %d calls", calls)
	}
	if allocs := testing.AllocsPerRun(100, func() { c.Get(good, now+int64(3*time.Second)) }); allocs != 0 {
		t.Fatalf("cached Get allocates %v", allocs)
	}
}
