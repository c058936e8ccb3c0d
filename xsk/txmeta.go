package xsk

import (
	"encoding/binary"
	"fmt"

	"github.com/xdpkit/xdpkit/umem"
)

// TX completion timestamps and launch time, through the TX metadata area
// in front of a frame (umem.TxMetadata; the descriptor carries
// OptTxMetadata):
//
//   - XDP_TXMD_FLAGS_TIMESTAMP (Linux 6.8) asks for the time the frame
//     left; the kernel writes it over the request, at offset 8 of the
//     area (xsk_tx_metadata.completion.tx_timestamp), before the frame
//     comes back on the Completion ring, and TxTimestamp reads it there.
//     A zero-copy driver that implements it (netdev xsk-features
//     tx-timestamp) gives the NIC's hardware time; copy mode gives a
//     software time, CLOCK_TAI, taken when the kernel frees the sent skb
//     (xsk_destruct_skb: after the driver's transmit; for veth, once the
//     peer has taken the packet).
//   - XDP_TXMD_FLAGS_LAUNCH_TIME (Linux 6.15) asks the device to send the
//     frame no earlier than LaunchTime, in the clock of the queue's
//     launch-time offload (the NIC's PTP clock, set up with the taprio or
//     etf qdisc). Only a driver that advertises tx-launch-time-fifo (igc,
//     stmmac, ...) honours it. Copy mode hands it to the driver in the
//     skb's tstamp but sends past the qdiscs, so again only such a driver
//     does anything with it; veth sends at once.
//
// TxTimestamps and LaunchTime say whether a socket can have them, with
// an error matching ErrNotSupported where it cannot.

// FeatureError reports a feature a socket's device or kernel lacks, and
// why. It matches ErrNotSupported with errors.Is.
type FeatureError struct {
	Feature string // "TX completion timestamps", "launch time", "zero-copy on eth0 queue 0"
	Reason  string
	Err     error // the system call's error, if one was refused (nil otherwise)
}

// Error names the feature and the kernel that brought it.
func (e *FeatureError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("xsk: %s not supported: %s: %v", e.Feature, e.Reason, e.Err)
	}
	return fmt.Sprintf("xsk: %s not supported: %s", e.Feature, e.Reason)
}

// Unwrap returns the system call's error.
func (e *FeatureError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotSupported) true.
func (e *FeatureError) Is(target error) bool { return target == ErrNotSupported }

// txMetaCheck is what both features need: a TX ring and a UMEM with a TX
// metadata area that the kernel accepted.
func (s *Socket) txMetaCheck(feature string) error {
	if s.tx == nil {
		return &FeatureError{Feature: feature, Reason: "the socket has no TX ring"}
	}
	if s.umem.TxMetadataLen() < umem.TxMetadataSize {
		return &FeatureError{Feature: feature, Reason: fmt.Sprintf("the UMEM has no TX metadata area (umem.Config.TxMetadataLen %d < umem.TxMetadataSize)", s.umem.TxMetadataLen())}
	}
	return nil
}

// TxTimestamps reports whether frames sent on s can carry
// XDP_TXMD_FLAGS_TIMESTAMP and come back with a completion timestamp
// (TxTimestamp): in copy mode always, given a TX metadata area (a
// software CLOCK_TAI time); in zero-copy mode where the driver
// advertises tx-timestamp. It asks the netdev family about a zero-copy
// socket's device, in the calling thread's network namespace, which
// must be the socket's. It returns nil, or an error matching
// ErrNotSupported (a *FeatureError).
func (s *Socket) TxTimestamps() error {
	const feature = "TX completion timestamps"
	if err := s.txMetaCheck(feature); err != nil {
		return err
	}
	if !s.zc {
		return nil
	}
	return s.deviceHas(feature, XSKTxTimestamp)
}

// LaunchTime reports whether frames sent on s can carry
// XDP_TXMD_FLAGS_LAUNCH_TIME with effect: where the driver advertises
// tx-launch-time-fifo (and its queue's launch-time offload is set up).
// veth does not. The device is looked up in the calling thread's network
// namespace, which must be the socket's. It returns nil, or an error
// matching ErrNotSupported (a *FeatureError).
func (s *Socket) LaunchTime() error {
	const feature = "launch time"
	if err := s.txMetaCheck(feature); err != nil {
		return err
	}
	return s.deviceHas(feature, XSKTxLaunchTimeFIFO)
}

func (s *Socket) deviceHas(feature string, bit XSKFeatures) error {
	d, err := Device(s.ifname)
	if err != nil {
		return fmt.Errorf("xsk: %s: cannot ask %s what it supports: %w", feature, s.ifname, err)
	}
	if d.XSKFeatures&bit == 0 {
		return &FeatureError{Feature: feature, Reason: fmt.Sprintf("%s (driver %s) does not advertise %s (its xsk-features: %q, from %s)",
			s.ifname, d.Driver, bit, d.XSKFeatures, d.FeaturesFrom)}
	}
	return nil
}

// txTimestampOff is the offset of xsk_tx_metadata.completion.tx_timestamp
// in the TX metadata area: it overlays the request's csum_start and
// csum_offset.
const txTimestampOff = 8

// RequestTxTimestamp sets XDP_TXMD_FLAGS_TIMESTAMP in the TX metadata of
// the frame at addr (the packet's address, as in its descriptor) and
// clears the completion field, so that TxTimestamp reports none unless
// the kernel writes one. A checksum request (umem.TxMetadataChecksum)
// shares that field: set CsumStart and CsumOffset after this call. It
// returns false when the frame has no TX metadata area. The descriptor
// must carry OptTxMetadata.
func RequestTxTimestamp(u *umem.UMEM, addr uint64) bool {
	md := u.TxMetadataAt(addr)
	if md == nil {
		return false
	}
	md.CsumStart, md.CsumOffset = 0, 0
	mem := u.Bytes()
	binary.NativeEndian.PutUint64(mem[addr-uint64(u.TxMetadataLen())+txTimestampOff:], 0)
	md.Flags |= umem.TxMetadataTimestamp
	return true
}

// SetLaunchTime sets XDP_TXMD_FLAGS_LAUNCH_TIME and the launch time (ns,
// the clock of the queue's launch-time offload) in the TX metadata of the
// frame at addr; false when the frame has no TX metadata area. See
// Socket.LaunchTime for where it has an effect.
func SetLaunchTime(u *umem.UMEM, addr uint64, ns uint64) bool {
	md := u.TxMetadataAt(addr)
	if md == nil {
		return false
	}
	md.LaunchTime = ns
	md.Flags |= umem.TxMetadataLaunchTime
	return true
}

// TxTimestamp returns the completion timestamp of the frame at addr, an
// address from the Completion ring of a frame sent with
// RequestTxTimestamp; ok is false when the frame did not ask for one or
// the kernel wrote none. In copy mode it is CLOCK_TAI nanoseconds; from
// a zero-copy driver, the NIC's clock. Read it before the frame is used
// again.
func TxTimestamp(u *umem.UMEM, addr uint64) (ns int64, ok bool) {
	md := u.TxMetadataAt(addr)
	if md == nil || md.Flags&umem.TxMetadataTimestamp == 0 {
		return 0, false
	}
	mem := u.Bytes()
	v := binary.NativeEndian.Uint64(mem[addr-uint64(u.TxMetadataLen())+txTimestampOff:])
	return int64(v), v != 0
}
