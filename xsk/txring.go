package xsk

import "github.com/xdpkit/xdpkit/umem"

// TXRing carries packets to send to the kernel.
// Producer: the application (one goroutine at a time); consumer: the kernel.
type TXRing struct {
	ring
	descs []Desc // entries, in the mapping
	umem  *umem.UMEM
}

// Produce puts as many of descs on the ring as fit, publishes them with
// one index store, and returns how many it took. Their frames pass to the
// kernel until they come back on the Completion ring. A multi-buffer
// packet must not be split: when the ring cannot take all its buffers,
// Produce stops before its first one.
//
// Produce does not wake the kernel; call Socket.KickTX after a batch.
// Data written with nontemporal stores must be fenced (nt.Fence) before
// Produce publishes it.
func (t *TXRing) Produce(descs []Desc) int {
	if !t.g.enter() {
		return 0
	}
	defer t.g.exit()
	n := t.free(uint32(len(descs)))
	n = min(n, uint32(len(descs)))
	if n == 0 {
		return 0
	}
	if int(n) < len(descs) {
		// Do not end the batch inside a multi-buffer packet.
		for n > 0 && descs[n-1].Options&OptContd != 0 {
			n--
		}
		if n == 0 {
			return 0
		}
	}
	idx := t.local
	for i := uint32(0); i < n; i++ {
		t.descs[(idx+i)&t.mask] = descs[i]
	}
	t.submit(n)
	t.umem.Moved(umem.Held, umem.TX, int(n))
	return int(n)
}

// Free reports how many descriptors Produce could write now.
func (t *TXRing) Free() int {
	if !t.g.enter() {
		return 0
	}
	defer t.g.exit()
	return int(t.free(t.size))
}

// Pending is the number of descriptors submitted that the kernel has not
// taken off the ring yet. While it is non-zero after a batch, the caller
// should kick again (the kernel may stop early, e.g. copy mode's 32-frame
// budget per system call).
func (t *TXRing) Pending() int {
	if !t.g.enter() {
		return 0
	}
	defer t.g.exit()
	return int(t.pending())
}

// Size is the ring's capacity.
func (t *TXRing) Size() int { return int(t.size) }

// NeedWakeup reports whether the kernel asks for a system call to start
// sending (see Socket.KickTX).
func (t *TXRing) NeedWakeup() bool {
	if !t.g.enter() {
		return false
	}
	defer t.g.exit()
	return t.needWakeup()
}
