package rxpath

import "github.com/xdpkit/xdpkit/xsk"

// Packet is one received packet as the handler sees it. The Poller reuses
// it: it is valid only until the handler returns.
type Packet struct {
	// Data is the packet, or the first buffer of a multi-buffer packet. A
	// copied packet's Data is in the handler's (or the poller's) copy
	// buffer; a lent packet's Data aliases the UMEM and is valid until the
	// handler returns, or until the kept frames are given back.
	Data []byte
	// Segments are all of the packet's buffers in order; Segments[0] is
	// Data. It has more than one entry only for multi-buffer packets.
	Segments [][]byte
	// Len is the packet's length: the sum of the Segments' lengths.
	Len int
	// Socket is the socket the packet came from; Index is its position
	// among the sockets given to New.
	Socket *xsk.Socket
	Index  int

	copied bool
	kept   bool
	descs  []xsk.Desc
	meta   meta   // with Config.Metadata; meta.go
	front  []byte // Front: the first frame up to Data
}

// Copied reports whether Data is a copy whose UMEM frame was recycled
// already. Keep has nothing to hand over for a copied packet.
func (p *Packet) Copied() bool { return p.copied }

// Keep takes a lent packet's frames away from the poller: it appends the
// packet's descriptors (OptContd kept on all but the last) to dst and
// returns the result. The caller then owns the frames (umem.Held) and must
// give each back, with umem.UMEM.Put(desc.Addr), or by producing the
// descriptors on a TX ring of the same UMEM, whose completions come back
// to the caller (a forwarder's handler gives those to Poller.Recycle).
// Data and Segments stay valid until then. For a copied packet, or a
// second Keep, it returns dst unchanged.
func (p *Packet) Keep(dst []xsk.Desc) []xsk.Desc {
	if p.copied || p.kept {
		return dst
	}
	p.kept = true
	return append(dst, p.descs...)
}

// Handler receives packets. Receive runs on the Poller's goroutine, one
// packet at a time; it must not block for long, since the Fill rings wait
// for it.
type Handler interface {
	Receive(p *Packet)
}

// RoundEnder is implemented by a Handler that wants to know when a poll
// round ends (NAPI's end of poll), to finish what it batched across the
// round's packets: a forwarder puts its TX batch on the ring and kicks
// once per round, as drivers flush XDP redirects at the end of
// napi_poll. EndRound runs on the Poller's goroutine after every round,
// before the Poller sleeps or polls again.
type RoundEnder interface {
	EndRound()
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(p *Packet)

// Receive calls f(p).
func (f HandlerFunc) Receive(p *Packet) { f(p) }

// Copier is implemented by a Handler that supplies the buffers small
// packets are copied into, so that it keeps the copy after Receive
// returns. CopyBuffer returns a buffer with room for n bytes (cap >= n);
// one with less room makes the poller lend the packet instead.
type Copier interface {
	CopyBuffer(n int) []byte
}
