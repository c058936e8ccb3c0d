package payload

import (
	"encoding/binary"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A stamped payload (xdpgen -timestamp) has its own magic and carries the
// send time, CLOCK_TAI nanoseconds, in the 8 bytes after the header; the
// pattern then starts after those 8 bytes, as it would have:
//
//	0      4      6      8              16          24
//	| XKT1  | flow | size | sequence     | send time | pattern ...
//
// CLOCK_TAI is the clock of bpf_ktime_get_tai_ns, which the XDP program
// uses for its receive time (rxpath.Packet.XDPTime), and of the kernel's
// software TX completion timestamps, so a receiver on the same host
// subtracts like from like.

// MagicStamped marks a stamped generator payload ("XKT1").
const MagicStamped uint32 = 0x584b5431

// StampLen is the size of the send time after the header.
const StampLen = 8

// PutStamped writes the header of a stamped payload and the send time
// sent into b[:HeaderLen+StampLen].
func PutStamped(b []byte, flow uint16, size int, seq uint64, sent int64) {
	_ = b[HeaderLen+StampLen-1]
	Put(b, flow, size, seq)
	binary.BigEndian.PutUint32(b[0:], MagicStamped)
	binary.BigEndian.PutUint64(b[HeaderLen:], uint64(sent))
}

// ParseAny reads the header of a plain or a stamped payload; sent is the
// send time of a stamped one (stamped true).
func ParseAny(b []byte) (h Header, sent int64, stamped, ok bool) {
	if len(b) < HeaderLen+StampLen || binary.BigEndian.Uint32(b) != MagicStamped {
		h, ok = Parse(b)
		return h, 0, false, ok
	}
	h = Header{
		Flow: binary.BigEndian.Uint16(b[4:]),
		Size: binary.BigEndian.Uint16(b[6:]),
		Seq:  binary.BigEndian.Uint64(b[8:]),
	}
	return h, int64(binary.BigEndian.Uint64(b[HeaderLen:])), true, true
}

// CheckStamped is Check for a stamped payload: the pattern after the
// send time.
func CheckStamped(pattern []byte, b []byte, h Header) bool {
	if int(h.Size) != len(b) || len(b) < HeaderLen+StampLen || len(b)+256 > len(pattern)+HeaderLen {
		return false
	}
	return string(b[HeaderLen+StampLen:]) == string(Body(pattern, h.Seq, len(b))[StampLen:])
}

var (
	taiOnce   sync.Once
	taiOffset int64
)

// TAINow returns CLOCK_TAI in nanoseconds: the vDSO's CLOCK_REALTIME
// (time.Now) plus the TAI offset, which is read once (the kernel's
// offset is whole seconds and changes only at a leap second or when
// chrony or ntpd sets it). clock_gettime(CLOCK_TAI) itself is a system
// call from Go, too dear per packet.
func TAINow() int64 {
	taiOnce.Do(func() {
		var tai unix.Timespec
		r1 := time.Now().UnixNano()
		if unix.ClockGettime(unix.CLOCK_TAI, &tai) != nil {
			return // offset 0: TAI as UTC
		}
		r2 := time.Now().UnixNano()
		d := tai.Nano() - (r1+r2)/2
		taiOffset = (d + sign(d)*int64(time.Second)/2) / int64(time.Second) * int64(time.Second)
	})
	return time.Now().UnixNano() + taiOffset
}

func sign(d int64) int64 {
	if d < 0 {
		return -1
	}
	return 1
}
