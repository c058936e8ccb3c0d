package xsk

import "github.com/xdpkit/xdpkit/internal/xdpprog"

// RX metadata: with ProgramConfig.Metadata, the program writes a 32-byte
// record in front of every frame it redirects (at desc.Addr -
// RXMetaLen), which rxpath.Config.Metadata reads into rxpath.Packet.

// RXMetaLen is the length of the RX metadata record in front of a frame.
const RXMetaLen = xdpprog.MetaLen

// MetadataLevel is what the program writes into the RX metadata record.
type MetadataLevel int

// Metadata levels, from the least to the most.
const (
	// MetadataNone: no record (the plain program).
	MetadataNone = MetadataLevel(xdpprog.MetaNone)
	// MetadataXDPTime: the time the XDP hook ran (CLOCK_TAI,
	// bpf_ktime_get_tai_ns, Linux 6.1) only. This is what a program not
	// bound to the device, or attached in generic mode, gets.
	MetadataXDPTime = MetadataLevel(xdpprog.MetaXDPTimeOnly)
	// MetadataDevice: also the device's RX timestamp and RX hash, through
	// the XDP RX metadata kfuncs (Linux 6.3, a program bound to the device
	// with BPF_F_XDP_DEV_BOUND_ONLY, native mode). Each is still present
	// only where the driver has it for the packet: veth has a hash for
	// every packet it got as an skb, and a timestamp only for one a NIC
	// stamped in hardware.
	MetadataDevice = MetadataLevel(xdpprog.MetaKfuncs)
)

// String names the level.
func (l MetadataLevel) String() string { return xdpprog.MetaLevel(l).String() }

// Metadata reports what the program writes in front of each frame and,
// when that is less than ProgramConfig.Metadata asked for, why (the
// kernel's BTF lacks the kfuncs, the device-bound load failed, the attach
// is generic). Without ProgramConfig.Metadata it is MetadataNone, nil.
func (p *Program) Metadata() (MetadataLevel, error) {
	l, why := p.p.Metadata()
	return MetadataLevel(l), why
}
