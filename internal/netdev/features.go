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
