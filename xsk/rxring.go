package xsk

import "github.com/xdpkit/xdpkit/umem"

// RXRing carries received packets from the kernel.
// Producer: the kernel; consumer: the application (one goroutine at a time).
type RXRing struct {
	ring
	descs []Desc // entries, in the mapping
	umem  *umem.UMEM
}

// Consume copies up to len(descs) received descriptors into descs,
// releases their ring entries with one index store and returns how many
// it took. Their frames pass to the application, which must give each
// back (Fill ring, TX ring or umem.Put). An empty ring costs one atomic
// load and no system call.
func (r *RXRing) Consume(descs []Desc) int {
	// The ring methods leave the guard without defer: nothing between
	// enter and exit can panic (n <= len(descs), indexes masked).
	if !r.g.enter() {
		return 0
	}
	n := r.avail(uint32(len(descs)))
	if n == 0 {
		r.g.exit()
		return 0
	}
	idx := r.local
	for i := uint32(0); i < n; i++ {
		descs[i] = r.descs[(idx+i)&r.mask]
	}
	r.release(n)
	r.g.exit()
	r.umem.Moved(umem.Fill, umem.Held, int(n))
	return int(n)
}

// Len is the number of received descriptors waiting.
func (r *RXRing) Len() int {
	if !r.g.enter() {
		return 0
	}
	n := r.queued()
	r.g.exit()
	return int(n)
}

// Size is the ring's capacity.
func (r *RXRing) Size() int { return int(r.size) }
