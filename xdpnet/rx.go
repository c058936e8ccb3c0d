package xdpnet

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/xdpkit/xdpkit/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
)

// slot holds one received datagram until a reader takes it.
type slot struct {
	buf    []byte // the frame, copied out of the UMEM by the poller
	ext    []byte // a larger datagram from the kernel socket, else nil
	off, n int    // payload within buf (or ext)
	src    netip.AddrPort
}

func (s *slot) payload() []byte {
	if s.ext != nil {
		return s.ext[s.off : s.off+s.n]
	}
	return s.buf[s.off : s.off+s.n]
}

// rxQueue passes datagrams from the queues' pollers (and the kernel
// socket's reader) to ReadFrom: a ring of ready slots and a stack of free
// ones under one mutex, taken once per poll round by a poller and once
// per read by a reader.
type rxQueue struct {
	mu          sync.Mutex
	slots       []slot
	ready       []int32 // ring of slot indexes, len(slots) entries
	head, count int
	free        []int32

	notify chan struct{} // one token: datagrams are ready
}

func (q *rxQueue) init(n, bufLen int) {
	q.slots = make([]slot, n)
	q.ready = make([]int32, n)
	q.free = make([]int32, n)
	mem := make([]byte, n*bufLen)
	for i := range q.slots {
		q.slots[i].buf = mem[i*bufLen : (i+1)*bufLen : (i+1)*bufLen]
		q.free[i] = int32(i)
	}
	q.notify = make(chan struct{}, 1)
}

func (q *rxQueue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// takeFree moves up to len(cache)'s spare capacity of free slots into cache.
func (q *rxQueue) takeFree(cache []int32) []int32 {
	q.mu.Lock()
	k := min(cap(cache)-len(cache), len(q.free))
	cache = append(cache, q.free[len(q.free)-k:]...)
	q.free = q.free[:len(q.free)-k]
	q.mu.Unlock()
	return cache
}

// publish makes the slots in batch ready for readers.
func (q *rxQueue) publish(batch []int32) {
	q.mu.Lock()
	for _, i := range batch {
		q.ready[(q.head+q.count)%len(q.ready)] = i
		q.count++
	}
	q.mu.Unlock()
	q.wake()
}

// endRound makes the slots in batch ready for readers and gives back the
// unused free slots in cache and cur (-1: none), under one lock.
func (q *rxQueue) endRound(batch, cache []int32, cur int32) {
	q.mu.Lock()
	for _, i := range batch {
		q.ready[(q.head+q.count)%len(q.ready)] = i
		q.count++
	}
	q.free = append(q.free, cache...)
	if cur >= 0 {
		q.free = append(q.free, cur)
	}
	q.mu.Unlock()
	if len(batch) > 0 {
		q.wake()
	}
}

// pop copies the oldest ready datagram into b and frees its slot. It
// reports false when none is ready.
func (q *rxQueue) pop(b []byte) (int, netip.AddrPort, bool) {
	q.mu.Lock()
	if q.count == 0 {
		q.mu.Unlock()
		return 0, netip.AddrPort{}, false
	}
	i := q.ready[q.head]
	q.head = (q.head + 1) % len(q.ready)
	q.count--
	s := &q.slots[i]
	n := copy(b, s.payload())
	src := s.src
	s.ext = nil
	q.free = append(q.free, i)
	more := q.count > 0
	q.mu.Unlock()
	if more {
		q.wake() // another reader may be waiting
	}
	return n, src, true
}

// pushCopy queues a copy of payload (from the kernel socket). It reports
// false when no slot is free.
func (q *rxQueue) pushCopy(payload []byte, src netip.AddrPort) bool {
	q.mu.Lock()
	if len(q.free) == 0 {
		q.mu.Unlock()
		return false
	}
	i := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	s := &q.slots[i]
	if len(payload) > len(s.buf) {
		s.ext = append([]byte(nil), payload...)
	} else {
		copy(s.buf, payload)
	}
	s.off, s.n, s.src = 0, len(payload), src
	q.ready[(q.head+q.count)%len(q.ready)] = i
	q.count++
	q.mu.Unlock()
	q.wake()
	return true
}

// counters are one receive path's counts; one goroutine writes them.
type counters struct {
	received, dropped, malformed, notOurs, badSum atomic.Uint64
	readErrors                                    atomic.Uint64 // the kernel socket's failed reads
	uncopied                                      atomic.Uint64 // multi-buffer frames
}

// handler receives one queue's packets (rxpath.Handler, Copier and
// RoundEnder): each packet is copied by the poller straight into a free
// slot, checked, and made ready for readers at the end of the round.
type handler struct {
	q            *rxQueue
	local        netip.AddrPort
	zone         string // the interface's name: link-local sources' zone
	trustPartial bool
	f            pkt.Frame
	cache        []int32 // free slots taken from q
	cur          int32   // the slot the last CopyBuffer handed out, or -1
	batch        []int32 // slots to publish at the end of the round
	c            *counters
}

const batchLen = 64

func newHandler(q *rxQueue, local netip.AddrPort, zone string, trustPartial bool, c *counters) *handler {
	return &handler{
		q: q, local: local, zone: zone, trustPartial: trustPartial, c: c, cur: -1,
		cache: make([]int32, 0, batchLen), batch: make([]int32, 0, batchLen),
	}
}

// CopyBuffer implements rxpath.Copier: a free slot's buffer, or nil when
// the read queue is full (the poller then lends the packet, and Receive
// drops it).
func (h *handler) CopyBuffer(n int) []byte {
	if h.cur < 0 {
		if len(h.cache) == 0 {
			h.cache = h.q.takeFree(h.cache)
			if len(h.cache) == 0 {
				return nil
			}
		}
		h.cur = h.cache[len(h.cache)-1]
		h.cache = h.cache[:len(h.cache)-1]
	}
	return h.q.slots[h.cur].buf
}

// Receive implements rxpath.Handler.
func (h *handler) Receive(p *rxpath.Packet) {
	if !p.Copied() {
		if len(p.Segments) > 1 || h.cur >= 0 {
			h.c.uncopied.Add(1) // more than one buffer: not copied into a slot
		} else {
			h.c.dropped.Add(1) // no free slot
		}
		return
	}
	payload, src, v := parseDatagram(p.Data, h.local, h.trustPartial, &h.f)
	switch v {
	case accept:
	case malformed:
		h.c.malformed.Add(1)
		return // the slot stays h.cur, for the next packet
	case notOurs:
		h.c.notOurs.Add(1)
		return
	default:
		h.c.badSum.Add(1)
		return
	}
	if src.Addr().Is6() && src.Addr().IsLinkLocalUnicast() {
		src = netip.AddrPortFrom(src.Addr().WithZone(h.zone), src.Port())
	}
	s := &h.q.slots[h.cur]
	s.off, s.n, s.src = h.f.L4+udpLen, len(payload), src
	h.batch = append(h.batch, h.cur)
	h.cur = -1
	h.c.received.Add(1)
	if len(h.batch) == cap(h.batch) {
		h.q.publish(h.batch)
		h.batch = h.batch[:0]
	}
}

// EndRound implements rxpath.RoundEnder: the round's datagrams become
// readable together, and the free slots the handler took and did not
// fill go back to the read queue, so that a queue that falls idle holds
// none of them.
func (h *handler) EndRound() {
	if len(h.batch) == 0 && len(h.cache) == 0 && h.cur < 0 {
		return // an empty round: no lock
	}
	h.q.endRound(h.batch, h.cache, h.cur)
	h.batch, h.cache, h.cur = h.batch[:0], h.cache[:0], -1
}

// release gives the handler's slots back after its poller stopped.
func (h *handler) release() { h.EndRound() }
