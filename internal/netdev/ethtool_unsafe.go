package netdev

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds every unsafe cast of the package: the SIOCETHTOOL ioctls
// that golang.org/x/sys/unix has no helper for. Channel counts go through
// github.com/safchain/ethtool (channels.go).

// ethtool commands (include/uapi/linux/ethtool.h).
const (
	ethtoolGRXCSUM = 0x14 // get RX checksum offload
	ethtoolSRXCSUM = 0x15 // set RX checksum offload
	ethtoolGTXCSUM = 0x16 // get TX checksum offload (legacy, all NETIF_F_CSUM_MASK bits)
	ethtoolSTXCSUM = 0x17 // set TX checksum offload
	ethtoolGGRO    = 0x2b // get generic receive offload
	ethtoolSGRO    = 0x2c // set generic receive offload
)

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data set. The padding makes it at
// least as large as the kernel's struct ifreq (40 bytes on 64-bit), which
// the kernel copies in whole.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24]byte
}

// ethtoolIoctl issues SIOCETHTOOL on ifname with data pointing to an
// ethtool command structure whose first field is the command.
func ethtoolIoctl(fd int, ifname string, data unsafe.Pointer) error {
	var ifr ifreqData
	if len(ifname) >= len(ifr.name) {
		return unix.EINVAL
	}
	copy(ifr.name[:], ifname)
	ifr.data = data
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return errno
	}
	return nil
}

func ethtoolGetValue(fd int, ifname string, cmd uint32) (uint32, error) {
	v := ethtoolValue{cmd: cmd}
	err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&v))
	return v.data, err
}

func ethtoolSetValue(fd int, ifname string, cmd, value uint32) error {
	v := ethtoolValue{cmd: cmd, data: value}
	return ethtoolIoctl(fd, ifname, unsafe.Pointer(&v))
}
