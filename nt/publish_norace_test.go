//go:build !race

package nt

import (
	"sync/atomic"
	"unsafe"
)

// publish stores v into p with an ordinary store (a MOV on amd64), which,
// unlike atomic.Store's locked XCHG, does not order earlier NT stores by
// itself: only Fence does. The race detector would flag it; its build uses
// publish_race_test.go.
func publish(p *atomic.Uint64, v uint64) {
	*(*uint64)(unsafe.Pointer(p)) = v
}
