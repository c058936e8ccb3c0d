package txpath

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ProbeDevice reads the facts the auto policy needs about the interface
// named ifname, in the calling thread's network namespace: whether
// tx-checksumming is on (ETHTOOL_GTXCSUM), and, when zeroCopy is set,
// whether the driver supports checksum requests on zero-copy AF_XDP
// sockets (the tx-checksum bit of the netdev family's xsk-features,
// Linux 6.8).
//
// TODO(lead): move to internal/netdev (netdev.Get) once it lands.
func ProbeDevice(ifname string, zeroCopy bool) (Device, error) {
	var d Device
	on, err := ethtoolValue(ifname, ethtoolGTXCSUM)
	if err != nil {
		return d, fmt.Errorf("txpath: probe %s: %w", ifname, err)
	}
	d.TxCsumOffload = on != 0
	if zeroCopy {
		f, err := xskFeatures(ifname)
		if err != nil {
			return d, fmt.Errorf("txpath: probe %s: %w", ifname, err)
		}
		d.XSKTxChecksum = f&netdevXSKFlagsTxChecksum != 0
	}
	return d, nil
}

const ethtoolGTXCSUM = 0x16

func ethtoolValue(ifname string, cmd uint32) (uint32, error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	v := struct{ cmd, data uint32 }{cmd: cmd}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&v)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 0, os.NewSyscallError(fmt.Sprintf("ioctl(SIOCETHTOOL %#x)", cmd), e)
	}
	return v.data, nil
}

// The netdev generic netlink family (include/uapi/linux/netdev.h).
const (
	netdevCmdDevGet          = 1
	netdevADevIfindex        = 1
	netdevADevXSKFeatures    = 6
	netdevXSKFlagsTxChecksum = 1 << 1
)

func xskFeatures(ifname string) (uint64, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return 0, err
	}
	fam, err := netlink.GenlFamilyGet("netdev")
	if err != nil {
		return 0, nil // before Linux 6.3: no netdev family, no xsk features
	}
	req := nl.NewNetlinkRequest(int(fam.ID), 0)
	req.AddData(&nl.Genlmsg{Command: netdevCmdDevGet, Version: uint8(fam.Version)})
	req.AddData(nl.NewRtAttr(netdevADevIfindex, nl.Uint32Attr(uint32(ifi.Index))))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return 0, fmt.Errorf("netdev dev-get: %w", err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return 0, fmt.Errorf("netdev dev-get: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type == netdevADevXSKFeatures && len(a.Value) >= 8 {
				return binary.NativeEndian.Uint64(a.Value), nil
			}
		}
	}
	return 0, nil
}
