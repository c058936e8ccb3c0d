package main

import (
	"testing"
	"time"
)

// TestSettle: the peer's count is read until it reaches what xdpgen
// sent, however slowly it grows, and no longer once it stops growing.
func TestSettle(t *testing.T) {
	// A counter at 100 that counts 1 more every 2nd read, to 150.
	reads := 0
	slow := func() (uint64, error) {
		reads++
		return 100 + uint64(min(reads/2, 50)), nil
	}
	n, err := settle(slow, 100, 50, time.Minute, 10*time.Minute)
	if err != nil || n != 150 {
		t.Errorf("slow counter: %d, %v; want 150", n, err)
	}
	// A counter that stops at 130 of 150: settle returns once it has
	// been still for quiet (well before limit).
	reads = 0
	stuck := func() (uint64, error) {
		reads++
		return 100 + uint64(min(reads, 30)), nil
	}
	start := time.Now()
	n, err = settle(stuck, 100, 50, 100*time.Millisecond, time.Minute)
	if err != nil || n != 130 || time.Since(start) > 30*time.Second {
		t.Errorf("stuck counter: %d, %v after %v; want 130 well before a minute", n, err, time.Since(start))
	}
}
