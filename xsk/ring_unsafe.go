package xsk

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	xdpRingNeedWakeup = 1 // XDP_RING_NEED_WAKEUP
	sizeofDesc        = 16
)

var _ [sizeofDesc]byte = [unsafe.Sizeof(Desc{})]byte{}

// mmapOffsets reads XDP_MMAP_OFFSETS: where producer, consumer, flags and
// entries sit in each ring's mapping. Never hard-coded.
func mmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	size := uint32(unsafe.Sizeof(off))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return off, os.NewSyscallError("getsockopt(XDP_MMAP_OFFSETS)", e)
	}
	if size != uint32(unsafe.Sizeof(off)) {
		return off, fmt.Errorf("xsk: XDP_MMAP_OFFSETS returned %d bytes, want %d (kernel older than 5.4?)", size, unsafe.Sizeof(off))
	}
	return off, nil
}

// mapRing maps one ring and fills in r's index pointers. entry is the
// size of one entry.
func mapRing(r *ring, fd int, pgoff int64, off unix.XDPRingOffset, size uint32, entry uintptr) (unsafe.Pointer, error) {
	length := int(off.Desc) + int(size)*int(entry)
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	base := unsafe.Pointer(&mem[0])
	r.mem = mem
	r.producer = (*uint32)(unsafe.Add(base, off.Producer))
	r.consumer = (*uint32)(unsafe.Add(base, off.Consumer))
	r.flags = (*uint32)(unsafe.Add(base, off.Flags))
	r.size = size
	r.mask = size - 1
	return unsafe.Add(base, off.Desc), nil
}

func (f *FillRing) mmap(fd int, off unix.XDPRingOffset, size uint32) error {
	p, err := mapRing(&f.ring, fd, unix.XDP_UMEM_PGOFF_FILL_RING, off, size, 8)
	if err != nil {
		return err
	}
	f.addrs = unsafe.Slice((*uint64)(p), size)
	// A producer ring starts with size free entries.
	f.local = *f.producer
	f.cached = *f.consumer + size
	return nil
}

func (c *CompletionRing) mmap(fd int, off unix.XDPRingOffset, size uint32) error {
	p, err := mapRing(&c.ring, fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off, size, 8)
	if err != nil {
		return err
	}
	c.addrs = unsafe.Slice((*uint64)(p), size)
	c.local = *c.consumer
	c.cached = *c.producer
	return nil
}

func (r *RXRing) mmap(fd int, off unix.XDPRingOffset, size uint32) error {
	p, err := mapRing(&r.ring, fd, unix.XDP_PGOFF_RX_RING, off, size, sizeofDesc)
	if err != nil {
		return err
	}
	r.descs = unsafe.Slice((*Desc)(p), size)
	r.local = *r.consumer
	r.cached = *r.producer
	return nil
}

func (t *TXRing) mmap(fd int, off unix.XDPRingOffset, size uint32) error {
	p, err := mapRing(&t.ring, fd, unix.XDP_PGOFF_TX_RING, off, size, sizeofDesc)
	if err != nil {
		return err
	}
	t.descs = unsafe.Slice((*Desc)(p), size)
	t.local = *t.producer
	t.cached = *t.consumer + size
	return nil
}

// unmap releases a ring's mapping; it is safe on a ring never mapped.
func (r *ring) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	if err != nil {
		return os.NewSyscallError("munmap", err)
	}
	return nil
}

// statsSize is the size of struct xdp_statistics since Linux 5.9.
const statsSize = uint32(unsafe.Sizeof(Stats{}))

// Statistics (struct xdp_statistics, Linux 5.9 layout). n is how many
// bytes the kernel filled: 24 before 5.9, which has only the first three
// counters.
func getStats(fd int) (Stats, uint32, error) {
	var s Stats
	size := statsSize
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&s)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return Stats{}, 0, os.NewSyscallError("getsockopt(XDP_STATISTICS)", e)
	}
	return s, size, nil
}

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
