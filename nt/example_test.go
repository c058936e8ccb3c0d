package nt_test

import (
	"bytes"
	"fmt"

	"github.com/xdpkit/xdpkit/nt"
)

// Copies with nontemporal stores, then one fence before the data is
// published to another CPU or a device (a ring's producer index store).
// Whether NT stores pay, and from which size, is measured on this host:
// nt.Default().Threshold (nt.Never when they never do).
func Example() {
	src := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	ring := make([][]byte, 8)
	for i := range ring {
		ring[i] = make([]byte, len(src))
		nt.Copy(ring[i], src)
	}
	nt.Fence() // once per batch: the stores are visible after it
	fmt.Println(bytes.Equal(ring[7], src))
	// Output:
	// true
}
