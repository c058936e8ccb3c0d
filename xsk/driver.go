package xsk

import "sort"

// DriverNotes is what xdpkit knows of a driver's AF_XDP needs, read from
// the driver's kernel source (Source names the file and function), and
// what it does about them. docs/kernels.md has the table.
type DriverNotes struct {
	Driver string
	// TXProgram: the driver sends zero-copy frames only while a native
	// XDP program is attached; its ndo_xsk_wakeup refuses the TX kick
	// otherwise (EINVAL, ENXIO or ENETDOWN). A socket that only
	// transmits gets a pass-everything program (Socket.AttachTXProgram).
	TXProgram bool
	// PageFrames: zero-copy needs UMEM frames of a page (4096 bytes);
	// FrameSizeFor chooses them.
	PageFrames bool
	// XDPMaxMTU is the largest MTU the driver accepts for a native,
	// single-buffer XDP program with 4 KiB pages; 0 where it is not a
	// fixed figure.
	XDPMaxMTU int
	// Source is the kernel source the notes come from.
	Source string
	// Note says what else a user meets on this driver.
	Note string
}

// drivers is the table, by the name ETHTOOL_GDRVINFO reports.
var drivers = map[string]DriverNotes{
	"i40e": {Driver: "i40e", TXProgram: true,
		Source: "drivers/net/ethernet/intel/i40e/i40e_xsk.c: i40e_xsk_wakeup returns EINVAL while !i40e_enabled_xdp_vsi",
		Note:   "the XDP TX rings exist only while a program is attached"},
	"ixgbe": {Driver: "ixgbe", TXProgram: true,
		Source: "drivers/net/ethernet/intel/ixgbe/ixgbe_xsk.c: ixgbe_xsk_wakeup returns ENXIO without adapter->xdp_prog",
		Note:   "XDP needs one TX queue per CPU (at most 64 CPUs with XDP)"},
	"ice": {Driver: "ice", TXProgram: true,
		Source: "drivers/net/ethernet/intel/ice/ice_xsk.c: ice_xsk_wakeup returns EINVAL while !ice_is_xdp_ena_vsi",
		Note:   "the XDP TX rings exist only while a program is attached"},
	"mlx5_core": {Driver: "mlx5_core", TXProgram: true,
		Source: "drivers/net/ethernet/mellanox/mlx5/core/en/xsk/tx.c: mlx5e_xsk_wakeup returns ENETDOWN while !mlx5e_xdp_is_active",
		Note:   "zero-copy queues are channels of their own: bind queue ids in use (ethtool -l); EINVAL for a frame size or MTU its striding RQ cannot map"},
	"ena": {Driver: "ena", PageFrames: true, XDPMaxMTU: 3498,
		Source: "drivers/net/ethernet/amazon/ena/ena_netdev.h: ENA_XDP_MAX_MTU (page - Ethernet, VLAN, FCS, XDP headroom, skb_shared_info); zero-copy only in the out-of-tree driver (ENA_AF_XDP_SUPPORT), with page-sized frames",
		Note:   "XDP needs as many free TX queues as queues in use: ethtool -L IFACE combined N/2"},
	"virtio_net": {Driver: "virtio_net",
		Source: "drivers/net/virtio_net.c: virtnet_xsk_wakeup checks only the queue pair; virtnet_xdp_set needs curr_queue_pairs free TX queues",
		Note:   "zero-copy needs VIRTIO_F_ACCESS_PLATFORM (QEMU iommu_platform=on) and a kernel whose virtio_net advertises xsk-zerocopy (Debian's 6.17, not 6.12); XDP needs spare queue pairs (\"too few free TX rings\"): ethtool -L IFACE combined N/2"},
	"veth": {Driver: "veth",
		Source: "drivers/net/veth.c: no ndo_xsk_wakeup, so no zero-copy; native XDP on the peer's receive path",
		Note:   "copy mode only"},
}

// Driver returns the notes of the driver named name, and whether the
// table has it.
func Driver(name string) (DriverNotes, bool) {
	d, ok := drivers[name]
	return d, ok
}

// Drivers returns the table, sorted by driver name.
func Drivers() []DriverNotes {
	out := make([]DriverNotes, 0, len(drivers))
	for _, d := range drivers {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Driver < out[j].Driver })
	return out
}

// Frame sizes FrameSizeFor chooses from.
const (
	FrameSizeDefault = 2048
	FrameSizePage    = 4096
)

// xdpFrameOverhead is what a frame holds besides the packet: the XDP
// headroom (XDP_PACKET_HEADROOM, 256) plus an Ethernet header with one
// VLAN tag.
const xdpFrameOverhead = 256 + 14 + 4

// FrameSizeFor returns the UMEM frame size for the device: a page where
// the driver needs page-sized frames for zero-copy (PageFrames) or where
// an MTU-sized packet does not fit 2048 bytes with the XDP headroom;
// 2048 otherwise.
func FrameSizeFor(info DeviceInfo) int {
	if d, ok := drivers[info.Driver]; ok && d.PageFrames {
		return FrameSizePage
	}
	if info.MTU+xdpFrameOverhead > FrameSizeDefault {
		return FrameSizePage
	}
	return FrameSizeDefault
}
