package txpath

import "errors"

// Errors returned by the Sender. Match them with errors.Is.
var (
	// ErrNoFrames: no UMEM frame is free now, even after reaping
	// completions. Nothing was written; Wait, then try again.
	ErrNoFrames = errors.New("txpath: no free UMEM frame")
	// ErrRingFull: the TX ring has no room now. Nothing was written;
	// Wait, then try again.
	ErrRingFull = errors.New("txpath: TX ring full")
	// ErrTooBig: the packet does not fit one frame and the socket was not
	// bound with XDP_USE_SG (xsk.Config.MultiBuffer), or it exceeds
	// Config.MaxPacket or what an IP header can describe.
	ErrTooBig = errors.New("txpath: packet too big")
	// ErrNoMetadata: the offload policy on a UMEM without a TX metadata
	// area (umem.Config.TxMetadataLen < umem.TxMetadataSize).
	ErrNoMetadata = errors.New("txpath: UMEM has no TX metadata area for checksum offload")
	// ErrNotSupported: the device cannot do what the policy asks.
	ErrNotSupported = errors.New("txpath: not supported")
	// ErrPolicy: an unknown policy, or one that cannot send this packet
	// (plain on UDP over IPv6, where a zero checksum is not allowed).
	ErrPolicy = errors.New("txpath: policy cannot be used")
	// ErrBadPacket: a frame given for checksumming is not Ethernet +
	// IPv4/IPv6 + UDP/TCP with consistent lengths, or its headers do not
	// fit the first UMEM frame.
	ErrBadPacket = errors.New("txpath: bad packet")
	// ErrBadFlow: a UDPFlow with invalid or mixed-family addresses.
	ErrBadFlow = errors.New("txpath: bad UDP flow")
	// ErrBadFrame: a Frame that this Sender did not hand out by Next, or
	// that was committed or released already, or a bad length.
	ErrBadFrame = errors.New("txpath: bad frame")
	// ErrConfig: an invalid Config.
	ErrConfig = errors.New("txpath: bad config")
	// ErrInFlight: Close gave up waiting for the kernel to complete frames.
	ErrInFlight = errors.New("txpath: frames still in flight")
)
