package xsk

import (
	"sync/atomic"

	"github.com/xdpkit/xdpkit/umem"
)

// Peek copies up to len(descs) received descriptors into descs without
// releasing their ring entries, starting skip entries after the first one
// not released yet, and returns how many it copied. The entries stay
// taken until Release gives them back: a consumer that peeks and does not
// release lets the ring fill up, and the kernel then drops what arrives
// (Stats().RXRingFull). Their frames stay lent to the kernel's side of
// the accounting until Release.
func (r *RXRing) Peek(descs []Desc, skip int) int {
	if skip < 0 || !r.g.enter() {
		return 0
	}
	defer r.g.exit()
	if r.cached-r.local <= uint32(skip) {
		r.cached = atomic.LoadUint32(r.producer)
	}
	entries := r.cached - r.local
	if entries <= uint32(skip) {
		return 0
	}
	n := min(entries-uint32(skip), uint32(len(descs)))
	idx := r.local + uint32(skip)
	for i := uint32(0); i < n; i++ {
		descs[i] = r.descs[(idx+i)&r.mask]
	}
	return int(n)
}

// Release gives the first n received entries back to the kernel, as
// Consume does after copying them, and returns how many it released (at
// most the number received). Their frames pass to the application.
func (r *RXRing) Release(n int) int {
	if n <= 0 || !r.g.enter() {
		return 0
	}
	defer r.g.exit()
	k := r.avail(uint32(n))
	r.release(k)
	r.umem.Moved(umem.Fill, umem.Held, int(k))
	return int(k)
}
