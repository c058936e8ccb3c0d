package xsk

import "github.com/xdpkit/xdpkit/umem"

// FillRing lends UMEM frames to the kernel for receiving.
// Producer: the application (one goroutine at a time); consumer: the kernel.
type FillRing struct {
	ring
	addrs []uint64 // entries, in the mapping
	umem  *umem.UMEM
}

// Produce puts as many of addrs on the ring as fit, publishes them with
// one index store, and returns how many it took. The frames pass from the
// application to the kernel.
func (f *FillRing) Produce(addrs []uint64) int {
	if !f.g.enter() {
		return 0
	}
	n := f.free(uint32(len(addrs)))
	n = min(n, uint32(len(addrs)))
	if n == 0 {
		f.g.exit()
		return 0
	}
	idx := f.local
	for i := uint32(0); i < n; i++ {
		f.addrs[(idx+i)&f.mask] = addrs[i]
	}
	f.submit(n)
	f.g.exit() // no defer: see RXRing.Consume
	f.umem.Moved(umem.Held, umem.Fill, int(n))
	return int(n)
}

// Free reports how many entries Produce could write now.
func (f *FillRing) Free() int {
	if !f.g.enter() {
		return 0
	}
	n := f.free(f.size)
	f.g.exit()
	return int(n)
}

// Len is the number of frames on the ring that the kernel has not
// consumed yet.
func (f *FillRing) Len() int {
	if !f.g.enter() {
		return 0
	}
	n := f.pending()
	f.g.exit()
	return int(n)
}

// Size is the ring's capacity.
func (f *FillRing) Size() int { return int(f.size) }

// NeedWakeup reports whether the kernel has run out of fill frames and
// asks for a wake-up (see Socket.KickRX).
func (f *FillRing) NeedWakeup() bool {
	if !f.g.enter() {
		return false
	}
	w := f.needWakeup()
	f.g.exit()
	return w
}
