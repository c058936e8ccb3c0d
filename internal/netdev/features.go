package netdev

import (
	"math/bits"
	"strconv"
	"strings"
)

// XDPFeatures are the NETDEV_XDP_ACT_* bits (enum netdev_xdp_act).
type XDPFeatures uint64

// XDP feature bits.
const (
	XDPBasic       XDPFeatures = 1 << 0 // XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX
	XDPRedirect    XDPFeatures = 1 << 1 // XDP_REDIRECT
	XDPNdoXmit     XDPFeatures = 1 << 2 // ndo_xdp_xmit: can be a redirect target
	XDPXSKZeroCopy XDPFeatures = 1 << 3 // AF_XDP zero-copy
	XDPHWOffload   XDPFeatures = 1 << 4
	XDPRxSG        XDPFeatures = 1 << 5 // multi-buffer XDP in the driver's RX path
	XDPNdoXmitSG   XDPFeatures = 1 << 6 // multi-buffer ndo_xdp_xmit
)

var xdpNames = []string{"basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"}

// String lists the set bits by their netdev.yaml names, separated by
// spaces, e.g. "basic redirect rx-sg"; unknown bits show as "bit<N>".
func (f XDPFeatures) String() string { return flagString(uint64(f), xdpNames) }

// XSKFeatures are the NETDEV_XSK_FLAGS_* bits (enum netdev_xsk_flags), the
// AF_XDP TX metadata offloads a driver implements.
type XSKFeatures uint64

// XSK feature bits.
const (
	XSKTxTimestamp      XSKFeatures = 1 << 0
	XSKTxChecksum       XSKFeatures = 1 << 1
	XSKTxLaunchTimeFIFO XSKFeatures = 1 << 2 // Linux 6.15
)

var xskNames = []string{"tx-timestamp", "tx-checksum", "tx-launch-time-fifo"}

// String lists the set bits by name, e.g. "tx-timestamp tx-checksum".
func (f XSKFeatures) String() string { return flagString(uint64(f), xskNames) }

// RxMetadataFeatures are the NETDEV_XDP_RX_METADATA_* bits, the kfuncs an
// XDP program can use to read RX metadata on this device.
type RxMetadataFeatures uint64

// RX metadata feature bits.
const (
	RxMetadataTimestamp RxMetadataFeatures = 1 << 0
	RxMetadataHash      RxMetadataFeatures = 1 << 1
	RxMetadataVLANTag   RxMetadataFeatures = 1 << 2
)

var rxMetaNames = []string{"timestamp", "hash", "vlan-tag"}

// String lists the set bits by name, e.g. "timestamp hash".
func (f RxMetadataFeatures) String() string { return flagString(uint64(f), rxMetaNames) }

func flagString(v uint64, names []string) string {
	if v == 0 {
		return "none"
	}
	var b strings.Builder
	for v != 0 {
		i := bits.TrailingZeros64(v)
		v &^= 1 << i
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if i < len(names) {
			b.WriteString(names[i])
		} else {
			b.WriteString("bit")
			b.WriteString(strconv.Itoa(i))
		}
	}
	return b.String()
}

// softwareKinds are the device kinds (rtnetlink IFLA_INFO_KIND as
// vishvananda/netlink names it, or the ethtool driver) whose "TX checksum
// offload" finishes no checksum: they hand a CHECKSUM_PARTIAL skb on as it
// is, with only the pseudo-header sum in its checksum field, to whatever
// receives it next. A kernel stack there accepts it (the skb says the
// checksum is to be trusted), but an XDP program or an AF_XDP socket sees
// the unfinished field. The value says where the skb goes.
var softwareKinds = map[string]string{
	"veth":    "veth hands the skb to its peer",
	"netkit":  "netkit hands the skb to its peer",
	"tuntap":  "tun/tap hands the skb to the reader of the device (with a virtio-net header saying NEEDS_CSUM, or none)",
	"tun":     "tun/tap hands the skb to the reader of the device (with a virtio-net header saying NEEDS_CSUM, or none)",
	"macvlan": "macvlan hands the skb to a sibling on the same lower device as it is (bridge mode)",
	"macvtap": "macvtap hands the skb to a sibling or its reader as it is",
	"ipvlan":  "ipvlan hands the skb to a sibling on the same lower device as it is",
	"ipvtap":  "ipvtap hands the skb to a sibling or its reader as it is",
	"bridge":  "a bridge forwards the skb to its ports as it is (a veth port passes it on unfinished)",
	"dummy":   "dummy drops the skb",
}

// SoftwareChecksum reports whether the device's TX checksum offload is
// software that leaves the checksum unfinished for some receivers (see
// softwareKinds), and why. Physical NIC drivers, whose hardware finishes
// the checksum, report false.
func (i Info) SoftwareChecksum() (bool, string) {
	for _, k := range []string{i.Kind, i.Driver} {
		if why, ok := softwareKinds[k]; ok {
			return true, why
		}
	}
	return false, ""
}
