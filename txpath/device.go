package txpath

import (
	"fmt"

	"github.com/xdpkit/xdpkit/internal/netdev"
)

// ProbeDevice reads the facts the auto policy needs about the interface
// named ifname, in the calling thread's network namespace: whether
// tx-checksumming is on, whether the device is a software device whose
// checksum offload finishes nothing (veth, netkit, tun/tap, macvlan,
// ipvlan, bridge: by rtnetlink link kind or driver), and whether the
// driver supports checksum requests on zero-copy AF_XDP sockets (the
// tx-checksum bit of the netdev family's xsk-features, Linux 6.8).
// zeroCopy says whether the socket is in zero-copy mode: only then does
// the xsk feature matter.
func ProbeDevice(ifname string, zeroCopy bool) (Device, error) {
	info, err := netdev.Get(ifname)
	if err != nil {
		return Device{}, fmt.Errorf("txpath: probe %s: %w", ifname, err)
	}
	sw, _ := info.SoftwareChecksum()
	kind := info.Driver
	if kind == "" {
		kind = info.Kind
	}
	return Device{
		TxCsumOffload: info.TxCsumOffload,
		XSKTxChecksum: zeroCopy && info.XSKFeatures&netdev.XSKTxChecksum != 0,
		Software:      sw,
		Kind:          kind,
	}, nil
}
