package xsk

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// queueCount returns the number of queues of ifname (the larger of RX and
// TX, combined included), from the ETHTOOL_GCHANNELS ioctl.
func queueCount(ifname string) (int, error) {
	type channels struct {
		cmd                                         uint32
		maxRX, maxTX, maxOther, maxCombined         uint32
		rxCount, txCount, otherCount, combinedCount uint32
	}
	ch := channels{cmd: 0x3c} // ETHTOOL_GCHANNELS
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, unix.EINVAL
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&ch)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 0, os.NewSyscallError("ioctl(ETHTOOL_GCHANNELS)", e)
	}
	n := max(ch.rxCount, ch.txCount) + ch.combinedCount
	return int(n), nil
}
