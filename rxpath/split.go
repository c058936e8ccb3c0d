package rxpath

import "github.com/xdpkit/xdpkit/xsk"

// MaxSegments is the longest descriptor chain the poller accepts as one
// packet. The kernel builds at most MAX_SKB_FRAGS+1 buffers per packet
// (18 by default, 46 at most); a longer chain is dropped as invalid.
const MaxSegments = 64

// Verdict is what SplitPacket found at the head of a descriptor slice.
type Verdict int

const (
	// Whole: the first n descriptors are one complete packet, every one
	// inside a single frame of the UMEM.
	Whole Verdict = iota
	// Partial: the slice ends inside a packet (the last descriptor has
	// OptContd); n is len(descs). Wait for the rest.
	Partial
	// OutOfBounds: the first n descriptors are one complete packet, but at
	// least one of them points outside the UMEM or across a frame end.
	OutOfBounds
	// TooLong: the first n = MaxSegments descriptors all have OptContd.
	TooLong
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case Whole:
		return "whole"
	case Partial:
		return "partial"
	case OutOfBounds:
		return "out of bounds"
	case TooLong:
		return "too long"
	}
	return "Verdict(?)"
}

// SplitPacket examines the descriptors at the head of descs, as read from
// an RX ring, and returns how many of them form the first packet and what
// they are. umemSize is the size of the UMEM in bytes and frameSize its
// frame size (a power of two). A descriptor is in bounds when
// Addr < umemSize and Addr+Len does not pass the end of the frame that
// holds Addr, which is the check umem.UMEM.Data makes. For an empty descs
// it returns (0, Partial).
//
// SplitPacket is a pure function: it reads nothing but its arguments.
func SplitPacket(descs []xsk.Desc, umemSize uint64, frameSize uint32) (n int, v Verdict) {
	end := -1
	for i := 0; i < len(descs) && i < MaxSegments; i++ {
		if descs[i].Options&xsk.OptContd == 0 {
			end = i + 1
			break
		}
	}
	if end < 0 {
		if len(descs) >= MaxSegments {
			return MaxSegments, TooLong
		}
		return len(descs), Partial
	}
	mask := uint64(frameSize) - 1
	for _, d := range descs[:end] {
		if !inBounds(d, umemSize, mask) {
			return end, OutOfBounds
		}
	}
	return end, Whole
}

// inBounds reports whether d lies inside one frame of a UMEM of size bytes
// with frames of mask+1 bytes. Written so that no sum can overflow.
func inBounds(d xsk.Desc, size, mask uint64) bool {
	if d.Addr >= size {
		return false
	}
	room := mask + 1 - d.Addr&mask // bytes from Addr to the frame's end
	return uint64(d.Len) <= room
}
