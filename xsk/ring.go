package xsk

import "sync/atomic"

// ring is the index logic shared by the four rings. Entries live in the
// typed ring that embeds it.
type ring struct {
	producer *uint32 // in the mapping: written by the producer only
	consumer *uint32 // in the mapping: written by the consumer only
	flags    *uint32 // in the mapping: XDP_RING_NEED_WAKEUP, written by the kernel
	mask     uint32
	size     uint32

	// For a ring we produce: local is our producer index (published by
	// submit), cached is the kernel's consumer index plus size.
	// For a ring we consume: local is our consumer index (published by
	// release), cached is the kernel's producer index.
	local  uint32
	cached uint32

	mem []byte // the mapping, for munmap
	g   *guard // the socket's: operations fail once it closes
}

// free returns how many entries a producer may write, reading the
// consumer index again only when the cache has fewer than n.
func (r *ring) free(n uint32) uint32 {
	free := r.cached - r.local
	if free >= n {
		return free
	}
	r.cached = atomic.LoadUint32(r.consumer) + r.size
	return r.cached - r.local
}

// submit publishes n entries written after local.
func (r *ring) submit(n uint32) {
	r.local += n
	atomic.StoreUint32(r.producer, r.local)
}

// avail returns how many entries a consumer may read, at most n, reading
// the producer index again only when the cache is empty.
func (r *ring) avail(n uint32) uint32 {
	entries := r.cached - r.local
	if entries == 0 {
		r.cached = atomic.LoadUint32(r.producer)
		entries = r.cached - r.local
	}
	return min(entries, n)
}

// release gives n read entries back to the producer.
func (r *ring) release(n uint32) {
	r.local += n
	atomic.StoreUint32(r.consumer, r.local)
}

// needWakeup reports whether the kernel asked for a system call.
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&xdpRingNeedWakeup != 0
}

// pending returns how many produced entries the consumer has not taken yet.
func (r *ring) pending() uint32 {
	return r.local - atomic.LoadUint32(r.consumer)
}

// queued returns how many entries the producer has published that we have
// not consumed, reading the producer index.
func (r *ring) queued() uint32 {
	return atomic.LoadUint32(r.producer) - r.local
}
