package xsk

import (
	"fmt"
	"net"

	"github.com/xdpkit/xdpkit/internal/netdev"
)

// DeviceInfo is what xdpkit knows of a network device: driver, MAC
// address, queue counts, MTU, TX checksum offload, and the XDP and AF_XDP
// features the kernel reports (netdev generic netlink, ethtool otherwise).
type DeviceInfo struct {
	Name   string
	Index  int
	Driver string // ETHTOOL_GDRVINFO driver, "" when the device has none (lo)
	Kind   string // rtnetlink link kind ("veth", "macvlan", "device", ...)

	// HardwareAddr is the device's MAC address: the source address of
	// the frames a socket on it sends.
	HardwareAddr net.HardwareAddr

	// RxQueues and TxQueues are the queues in use (real_num_*), which
	// bound the queue ids an AF_XDP socket can bind to. QueuesFrom says
	// where they came from: "ethtool-channels" (what the driver uses) or
	// "rtnetlink" (the queues allocated).
	RxQueues, TxQueues int
	QueuesFrom         string

	MTU int

	// TxCsumOffload reports whether the device currently offloads TX
	// checksums (ethtool -k "tx-checksumming").
	TxCsumOffload bool

	XDPFeatures        XDPFeatures
	XDPRxMetadata      RxMetadataFeatures
	XSKFeatures        XSKFeatures
	XDPZeroCopyMaxSegs uint32 // only reported with XDPXSKZeroCopy
	// FeaturesFrom is "netdev-genl" when the netdev generic-netlink
	// family (Linux 6.3) answered, "ethtool" when it does not exist: the
	// XDP and XSK features are then unknown (0).
	FeaturesFrom string
}

// String summarizes the device on one line.
func (i DeviceInfo) String() string {
	return fmt.Sprintf("%s (ifindex %d, driver %q, mac %v, %d rx/%d tx queues, mtu %d, tx-csum %v, xdp [%v], xsk [%v], from %s)",
		i.Name, i.Index, i.Driver, i.HardwareAddr, i.RxQueues, i.TxQueues, i.MTU, i.TxCsumOffload, i.XDPFeatures, i.XSKFeatures, i.FeaturesFrom)
}

// SoftwareChecksum reports whether the device is a software device (veth,
// netkit, tun/tap, macvlan, ipvlan, bridge, ...) whose TX checksum
// "offload" only marks the packet CHECKSUM_PARTIAL and hands it on
// unfinished, and why. An XDP program or AF_XDP socket behind such a
// device sees the pseudo-header sum in the checksum field. Physical NIC
// drivers, whose hardware finishes the checksum, report false.
func (i DeviceInfo) SoftwareChecksum() (bool, string) {
	return netdev.Info{Kind: i.Kind, Driver: i.Driver}.SoftwareChecksum()
}

// XDPFeatures are the XDP features of a device (NETDEV_XDP_ACT_*).
type XDPFeatures uint64

// XDP feature bits.
const (
	XDPBasic       = XDPFeatures(netdev.XDPBasic)       // XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX
	XDPRedirect    = XDPFeatures(netdev.XDPRedirect)    // XDP_REDIRECT
	XDPNdoXmit     = XDPFeatures(netdev.XDPNdoXmit)     // ndo_xdp_xmit: can be a redirect target
	XDPXSKZeroCopy = XDPFeatures(netdev.XDPXSKZeroCopy) // AF_XDP zero-copy
	XDPHWOffload   = XDPFeatures(netdev.XDPHWOffload)   // the program runs on the NIC
	XDPRxSG        = XDPFeatures(netdev.XDPRxSG)        // multi-buffer XDP in the driver's RX path
	XDPNdoXmitSG   = XDPFeatures(netdev.XDPNdoXmitSG)   // multi-buffer ndo_xdp_xmit
)

// String lists the set bits by their netdev.yaml names, e.g.
// "basic redirect rx-sg".
func (f XDPFeatures) String() string { return netdev.XDPFeatures(f).String() }

// XSKFeatures are the AF_XDP TX metadata offloads a driver implements
// (NETDEV_XSK_FLAGS_*).
type XSKFeatures uint64

// XSK feature bits.
const (
	XSKTxTimestamp      = XSKFeatures(netdev.XSKTxTimestamp)
	XSKTxChecksum       = XSKFeatures(netdev.XSKTxChecksum)       // XDP_TXMD_FLAGS_CHECKSUM on zero-copy sockets
	XSKTxLaunchTimeFIFO = XSKFeatures(netdev.XSKTxLaunchTimeFIFO) // Linux 6.15
)

// String lists the set bits by name, e.g. "tx-timestamp tx-checksum".
func (f XSKFeatures) String() string { return netdev.XSKFeatures(f).String() }

// RxMetadataFeatures are the RX metadata kfuncs an XDP program can use on
// the device (NETDEV_XDP_RX_METADATA_*).
type RxMetadataFeatures uint64

// RX metadata feature bits.
const (
	RxMetadataTimestamp = RxMetadataFeatures(netdev.RxMetadataTimestamp)
	RxMetadataHash      = RxMetadataFeatures(netdev.RxMetadataHash)
	RxMetadataVLANTag   = RxMetadataFeatures(netdev.RxMetadataVLANTag)
)

// String lists the set bits by name, e.g. "timestamp hash".
func (f RxMetadataFeatures) String() string { return netdev.RxMetadataFeatures(f).String() }

// Device returns the facts of the interface named name, in the calling
// thread's network namespace.
func Device(name string) (DeviceInfo, error) {
	i, err := netdev.Get(name)
	if err != nil {
		return DeviceInfo{}, err
	}
	ifi, err := net.InterfaceByIndex(i.Index)
	if err != nil {
		return DeviceInfo{}, fmt.Errorf("%w: %q: %w", ErrNoDevice, name, err)
	}
	return DeviceInfo{
		Name: i.Name, Index: i.Index, Driver: i.Driver, Kind: i.Kind, HardwareAddr: ifi.HardwareAddr,
		RxQueues: i.RxQueues, TxQueues: i.TxQueues, QueuesFrom: i.QueuesFrom,
		MTU: i.MTU, TxCsumOffload: i.TxCsumOffload,
		XDPFeatures:        XDPFeatures(i.XDPFeatures),
		XDPRxMetadata:      RxMetadataFeatures(i.XDPRxMetadata),
		XSKFeatures:        XSKFeatures(i.XSKFeatures),
		XDPZeroCopyMaxSegs: i.XDPZeroCopyMaxSegs,
		FeaturesFrom:       i.FeaturesFrom,
	}, nil
}

// HardwareAddr is the MAC address of the interface the socket is bound
// to, as it was when the socket was created: the source address of the
// frames it sends. It is shared; do not modify it.
func (s *Socket) HardwareAddr() net.HardwareAddr { return s.mac }

// queueCount returns the number of queues of ifname that can take a
// socket: the larger of its RX and TX queue counts.
func queueCount(ifname string) (int, error) {
	info, err := netdev.Get(ifname)
	if err != nil {
		return 0, err
	}
	return max(info.RxQueues, info.TxQueues), nil
}
