package xsk

import "github.com/xdpkit/xdpkit/umem"

// CompletionRing returns frames the kernel has finished sending.
// Producer: the kernel; consumer: the application (one goroutine at a time).
type CompletionRing struct {
	ring
	addrs []uint64 // entries, in the mapping
	umem  *umem.UMEM
}

// Consume copies up to len(addrs) completed frame addresses into addrs,
// releases their ring entries with one index store and returns how many
// it took. The frames pass back to the application.
func (c *CompletionRing) Consume(addrs []uint64) int {
	if !c.g.enter() {
		return 0
	}
	defer c.g.exit()
	n := c.avail(uint32(len(addrs)))
	if n == 0 {
		return 0
	}
	idx := c.local
	for i := uint32(0); i < n; i++ {
		addrs[i] = c.addrs[(idx+i)&c.mask]
	}
	c.release(n)
	c.umem.Moved(umem.TX, umem.Held, int(n))
	return int(n)
}

// Len is the number of completions waiting.
func (c *CompletionRing) Len() int {
	if !c.g.enter() {
		return 0
	}
	defer c.g.exit()
	return int(c.queued())
}

// Size is the ring's capacity.
func (c *CompletionRing) Size() int { return int(c.size) }
