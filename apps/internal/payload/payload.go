package payload

import (
	"bytes"
	"encoding/binary"
)

// HeaderLen is the size of the payload header.
const HeaderLen = 16

// Magic marks xdpkit generator payloads ("XKG1").
const Magic uint32 = 0x584b4731

// Put writes the header for flow and seq into b[:HeaderLen]; size is the
// payload length, recorded so that a truncated datagram is noticed.
func Put(b []byte, flow uint16, size int, seq uint64) {
	_ = b[HeaderLen-1]
	binary.BigEndian.PutUint32(b[0:], Magic)
	binary.BigEndian.PutUint16(b[4:], flow)
	binary.BigEndian.PutUint16(b[6:], uint16(size))
	binary.BigEndian.PutUint64(b[8:], seq)
}

// Header is a parsed payload header.
type Header struct {
	Flow uint16
	Size uint16
	Seq  uint64
}

// Parse reads the header of b; ok is false when b is not a generator
// payload.
func Parse(b []byte) (h Header, ok bool) {
	if len(b) < HeaderLen || binary.BigEndian.Uint32(b) != Magic {
		return h, false
	}
	return Header{
		Flow: binary.BigEndian.Uint16(b[4:]),
		Size: binary.BigEndian.Uint16(b[6:]),
		Seq:  binary.BigEndian.Uint64(b[8:]),
	}, true
}

// Pattern returns a buffer from which Body takes the pattern of any
// payload of up to max bytes.
func Pattern(max int) []byte {
	p := make([]byte, 256+max)
	for i := range p {
		p[i] = byte(i)
	}
	return p
}

// Body returns the pattern bytes of a payload of n bytes (n >= HeaderLen)
// with sequence number seq: what follows the header.
func Body(pattern []byte, seq uint64, n int) []byte {
	off := int((seq + HeaderLen) & 0xff)
	return pattern[off : off+n-HeaderLen]
}

// Check reports whether the whole payload b (header included) carries
// the pattern of seq and its recorded size.
func Check(pattern []byte, b []byte, h Header) bool {
	if int(h.Size) != len(b) || len(b) < HeaderLen || len(b)+256 > len(pattern)+HeaderLen {
		return false
	}
	return bytes.Equal(b[HeaderLen:], Body(pattern, h.Seq, len(b)))
}
