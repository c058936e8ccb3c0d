package xsk

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolRingparam is struct ethtool_ringparam.
type ethtoolRingparam struct {
	cmd               uint32
	rxMaxPending      uint32
	rxMiniMaxPending  uint32
	rxJumboMaxPending uint32
	txMaxPending      uint32
	rxPending         uint32
	rxMiniPending     uint32
	rxJumboPending    uint32
	txPending         uint32
}

var _ [36]byte = [unsafe.Sizeof(ethtoolRingparam{})]byte{}

// ifreqData is struct ifreq with ifr_data.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte // the rest of the union
}

// ethtoolIoctl makes the SIOCETHTOOL request rp on ifname, in the
// calling thread's network namespace.
func ethtoolIoctl(ifname string, rp *ethtoolRingparam) error {
	if len(ifname) >= unix.IFNAMSIZ {
		return unix.ENODEV
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	var ifr ifreqData
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(rp)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return os.NewSyscallError("ioctl(SIOCETHTOOL)", e)
	}
	return nil
}
