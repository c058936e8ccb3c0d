package rxpath

import (
	"encoding/binary"

	"github.com/xdpkit/xdpkit/internal/xdpprog"
)

// HashType is the type of an RX hash, the kernel's enum xdp_rss_hash_type:
// which headers the device hashed.
type HashType uint32

// Bits of HashType (include/net/xdp.h).
const (
	HashL3IPv4   HashType = 1 << 0
	HashL3IPv6   HashType = 1 << 1
	HashL3DynHdr HashType = 1 << 2
	HashL4       HashType = 1 << 3
	HashL4TCP    HashType = 1 << 4
	HashL4UDP    HashType = 1 << 5
	HashL4SCTP   HashType = 1 << 6
	HashL4IPSec  HashType = 1 << 7
	HashL4ICMP   HashType = 1 << 8
)

// meta is a packet's RX metadata record, decoded; flags 0 means none.
type meta struct {
	flags    uint32
	hash     uint32
	hashType uint32
	rxTS     uint64
	xdpTime  uint64
}

// read decodes the record in front of the frame at addr in mem, if there
// is one, and then clears its magic word, so that a frame reused by a
// program that writes none never shows an old record.
func (m *meta) read(mem []byte, addr uint64) {
	m.flags = 0
	if addr < xdpprog.MetaLen || addr > uint64(len(mem)) {
		return
	}
	r := mem[addr-xdpprog.MetaLen : addr]
	ne := binary.NativeEndian
	if ne.Uint32(r[28:]) != xdpprog.MetaMagic {
		return
	}
	ne.PutUint32(r[28:], 0)
	m.flags = ne.Uint32(r[24:])
	m.rxTS = ne.Uint64(r[0:])
	m.xdpTime = ne.Uint64(r[8:])
	m.hash = ne.Uint32(r[16:])
	m.hashType = ne.Uint32(r[20:])
}

// RXHash returns the hash the device computed over the packet's headers
// (bpf_xdp_metadata_rx_hash) and its type. ok is false when there is
// none: the Poller was not configured with Config.Metadata, the program
// is not bound to a device that has the kfunc (xsk.MetadataDevice), or
// the driver had no hash for this packet.
func (p *Packet) RXHash() (hash uint32, typ HashType, ok bool) {
	if p.meta.flags&xdpprog.MetaRXHash == 0 {
		return 0, 0, false
	}
	return p.meta.hash, HashType(p.meta.hashType), true
}

// RXTimestamp returns the device's receive timestamp in nanoseconds
// (bpf_xdp_metadata_rx_timestamp), in the device's clock: a NIC's PTP
// hardware clock, which phc2sys may keep in step with CLOCK_TAI. ok is
// false when there is none: as for RXHash, or when the driver reported no
// positive time (veth passes on the skb's hardware timestamp, which only
// a NIC sets, so a packet from a veth peer has none).
func (p *Packet) RXTimestamp() (ns int64, ok bool) {
	if p.meta.flags&xdpprog.MetaRXTimestamp == 0 {
		return 0, false
	}
	return int64(p.meta.rxTS), true
}

// XDPTime returns when the XDP program redirected the packet, in
// CLOCK_TAI nanoseconds (bpf_ktime_get_tai_ns): a software receive
// timestamp taken in the driver's receive path, before the socket's RX
// ring and the Poller's wake-up. ok is false when the Poller was not
// configured with Config.Metadata or the program writes no metadata
// (xsk.MetadataNone).
func (p *Packet) XDPTime() (ns int64, ok bool) {
	if p.meta.flags&xdpprog.MetaXDPTime == 0 {
		return 0, false
	}
	return int64(p.meta.xdpTime), true
}
