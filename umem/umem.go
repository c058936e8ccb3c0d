package umem

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/caps"
)

// Default sizes.
const (
	DefaultFrameSize  = 4096
	DefaultFrameCount = 4096
	// HugePageSize is the huge page size used with Config.HugePages.
	HugePageSize = 2 << 20
)

// Errors returned by New and the allocator.
var (
	ErrFrameSize    = errors.New("umem: frame size must be from 2048 to the page size, a power of two unless unaligned")
	ErrFrameCount   = errors.New("umem: frame count must be at least 1 and at most 1<<24")
	ErrHeadroom     = errors.New("umem: headroom plus TX metadata does not fit the frame")
	ErrMetadataLen  = errors.New("umem: TX metadata length must be a multiple of 8 below 256")
	ErrNoHugePages  = errors.New("umem: no 2 MiB huge pages reserved (see /proc/sys/vm/nr_hugepages)")
	ErrBusy         = errors.New("umem: still used by open sockets")
	ErrDoubleFree   = errors.New("umem: frame returned twice")
	ErrBadAddress   = errors.New("umem: address outside the UMEM")
	ErrNotSupported = errors.New("umem: not supported by this kernel")
)

// Config describes a UMEM. The zero value, or a nil *Config, gives 4096
// frames of 4096 bytes with no headroom and no TX metadata.
type Config struct {
	// FrameSize is the chunk size: a power of two from 2048 up to the
	// page size; with Unaligned, any size from 2048 up to the page size
	// (e.g. 4001). Default 4096.
	FrameSize  uint32
	FrameCount uint32 // default 4096
	// Headroom is reserved by the kernel in front of every received packet
	// (XDP_UMEM_REG frame_headroom).
	Headroom uint32
	// TxMetadataLen reserves room for a TxMetadata in front of every TX
	// packet (XDP_UMEM_TX_METADATA_LEN). Use TxMetadataSize to request
	// checksum offload; 0 disables TX metadata.
	TxMetadataLen uint32
	// TxSwCsum asks the kernel to compute requested checksums in software
	// (XDP_UMEM_TX_SW_CSUM, copy mode only): for tests.
	TxSwCsum bool
	// HugePages backs the UMEM with 2 MiB huge pages; New fails with
	// ErrNoHugePages when none are reserved.
	HugePages bool
	// Unaligned registers the UMEM with XDP_UMEM_UNALIGNED_CHUNK_FLAG:
	// descriptors may name any address, and a packet may cross frame
	// boundaries; RX descriptors carry the data's offset in their upper
	// bits (see ExtractAddr). Frame i starts at i*FrameSize, as the
	// kernel's own tests and libxdp lay them out. Packets that cross a
	// page boundary need physically contiguous pages in zero-copy mode,
	// where drivers drop Fill entries that cross onto a page that is not
	// contiguous with theirs: use HugePages, or a frame size that divides
	// the page. For applications that drive the rings of package xsk
	// themselves.
	Unaligned bool
}

// UMEM is registered packet memory. Its allocator and accounting are safe
// for concurrent use.
type UMEM struct {
	mem       []byte
	fullMem   []byte // the mapping, rounded up to huge pages
	fd        int
	frameSize uint32
	shift     uint
	count     uint32
	headroom  uint32
	metaLen   uint32
	flags     uint32
	huge      bool
	pow2      bool // frameSize is a power of two: shift and mask work

	mu      sync.Mutex
	free    []uint64 // stack of free frame addresses
	isFree  []bool   // by frame index
	closed  bool
	sockets int            // sockets attached
	bound   map[int]uint16 // bound sockets' fds and their bind flags
	// pending is the fd of a first socket attached and not yet bound (or
	// detached), -1 when there is none; AttachSocket waits on cond
	// meanwhile, so that concurrent sockets share one registration.
	pending int
	cond    *sync.Cond

	fill atomic.Int64
	tx   atomic.Int64
}

// New maps and registers a UMEM.
func New(cfg *Config) (*UMEM, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.FrameCount == 0 {
		c.FrameCount = DefaultFrameCount
	}
	if err := checkFrameSize(c.FrameSize, c.Unaligned); err != nil {
		return nil, err
	}
	if c.FrameCount > 1<<24 {
		return nil, fmt.Errorf("%w: got %d", ErrFrameCount, c.FrameCount)
	}
	if c.TxMetadataLen%8 != 0 || c.TxMetadataLen >= 256 {
		return nil, fmt.Errorf("%w: got %d", ErrMetadataLen, c.TxMetadataLen)
	}
	// The kernel needs XDP_PACKET_HEADROOM (256) in front of received data,
	// plus the frame_headroom; TX metadata sits in front of the packet too.
	if c.Headroom+c.TxMetadataLen+xdpPacketHeadroom+64 > c.FrameSize {
		return nil, fmt.Errorf("%w: headroom %d + metadata %d in a %d-byte frame",
			ErrHeadroom, c.Headroom, c.TxMetadataLen, c.FrameSize)
	}
	u := &UMEM{
		fd:        -1,
		pending:   -1,
		frameSize: c.FrameSize,
		count:     c.FrameCount,
		headroom:  c.Headroom,
		metaLen:   c.TxMetadataLen,
		huge:      c.HugePages,
	}
	u.pow2 = c.FrameSize&(c.FrameSize-1) == 0
	u.shift = uint(bits.Len32(c.FrameSize - 1)) // log2 of a power of two
	if c.Unaligned {
		u.flags |= umemUnalignedChunks
	}
	if c.TxMetadataLen > 0 {
		u.flags |= umemTxMetadataLen
	}
	if c.TxSwCsum {
		u.flags |= umemTxSwCsum
	}
	size := int(c.FrameSize) * int(c.FrameCount)
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_POPULATE
	if c.HugePages {
		size = (size + HugePageSize - 1) &^ (HugePageSize - 1)
		flags |= unix.MAP_HUGETLB // 2 MiB, the default huge page size
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		if c.HugePages && errors.Is(err, unix.ENOMEM) {
			return nil, fmt.Errorf("%w: mmap %d bytes: %w", ErrNoHugePages, size, err)
		}
		return nil, os.NewSyscallError("mmap", err)
	}
	u.mem = mem[:int(c.FrameSize)*int(c.FrameCount)]
	u.fullMem = mem

	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		_ = unix.Munmap(mem)
		return nil, caps.Wrap("umem: socket(AF_XDP)", caps.NetRaw, os.NewSyscallError("socket", err))
	}
	u.fd = fd
	if err := u.register(); err != nil {
		unix.Close(fd)
		_ = unix.Munmap(mem)
		return nil, err
	}
	u.free = make([]uint64, c.FrameCount)
	u.isFree = make([]bool, c.FrameCount)
	// Hand out low addresses first: pop from the end.
	for i := range u.free {
		u.free[i] = uint64(c.FrameCount-1-uint32(i)) * uint64(c.FrameSize)
	}
	for i := range u.isFree {
		u.isFree[i] = true
	}
	u.cond = sync.NewCond(&u.mu)
	live.Add(1)
	return u, nil
}

var live atomic.Int64

// Live returns how many UMEMs of this process are mapped and not yet
// closed: for leak checks in tests and for monitoring.
func Live() int { return int(live.Load()) }

// Close unregisters and unmaps the UMEM. It fails with ErrBusy while
// sockets still use it; after a successful Close it returns nil again.
func (u *UMEM) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil
	}
	if u.sockets > 0 {
		return fmt.Errorf("%w: %d socket(s)", ErrBusy, u.sockets)
	}
	u.closed = true
	live.Add(-1)
	var errs []error
	if u.fd >= 0 { // registered, never taken by a socket
		if err := unix.Close(u.fd); err != nil {
			errs = append(errs, os.NewSyscallError("close", err))
		}
		u.fd = -1
	}
	if err := unix.Munmap(u.fullMem); err != nil {
		errs = append(errs, os.NewSyscallError("munmap", err))
	}
	u.mem, u.fullMem = nil, nil
	return errors.Join(errs...)
}

// FD is a descriptor that names the UMEM to the kernel: a bound socket
// using it, or the descriptor it was registered on while no socket has
// taken that; -1 when there is none (after Close, or while no socket is
// open and the registration must be made again).
func (u *UMEM) FD() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if fd := u.sharedFD(); fd >= 0 {
		return fd
	}
	return u.fd
}

func (u *UMEM) sharedFD() int {
	for fd := range u.bound {
		return fd
	}
	return -1
}

// FrameSize is the size of one frame (chunk) in bytes.
func (u *UMEM) FrameSize() uint32 { return u.frameSize }

// FrameCount is the number of frames.
func (u *UMEM) FrameCount() uint32 { return u.count }

// Headroom is the frame headroom registered with the kernel.
func (u *UMEM) Headroom() uint32 { return u.headroom }

// TxMetadataLen is the size of the TX metadata area in front of each TX
// packet, 0 when TX metadata is off.
func (u *UMEM) TxMetadataLen() uint32 { return u.metaLen }

// TxSwCsum reports whether the UMEM was registered with XDP_UMEM_TX_SW_CSUM.
func (u *UMEM) TxSwCsum() bool { return u.flags&umemTxSwCsum != 0 }

// HugePages reports whether the UMEM is backed by huge pages.
func (u *UMEM) HugePages() bool { return u.huge }

// Size is the size of the UMEM in bytes (FrameSize * FrameCount).
func (u *UMEM) Size() uint64 { return uint64(len(u.mem)) }

// Bytes is the whole UMEM.
func (u *UMEM) Bytes() []byte { return u.mem }

// Base returns the address of the frame that contains addr.
func (u *UMEM) Base(addr uint64) uint64 {
	if u.pow2 {
		return addr &^ uint64(u.frameSize-1)
	}
	return addr - addr%uint64(u.frameSize)
}

// Frame returns the bytes of the frame that starts at (or contains) addr,
// from addr to the end of that frame. It returns nil for an address outside
// the UMEM.
func (u *UMEM) Frame(addr uint64) []byte {
	if addr >= uint64(len(u.mem)) {
		return nil
	}
	end := u.Base(addr) + uint64(u.frameSize)
	return u.mem[addr:end:end]
}

// Data returns the n bytes at addr if they lie inside one frame (with
// Unaligned: inside the UMEM), and false otherwise; use it for
// descriptors read from a ring. An unaligned UMEM's RX descriptors carry
// an offset in their upper bits: pass AddOffsetToAddr(desc.Addr).
func (u *UMEM) Data(addr uint64, n uint32) ([]byte, bool) {
	if addr >= uint64(len(u.mem)) {
		return nil, false
	}
	end := u.Base(addr) + uint64(u.frameSize)
	if u.Unaligned() {
		end = uint64(len(u.mem))
	}
	if addr+uint64(n) > end {
		return nil, false
	}
	return u.mem[addr : addr+uint64(n) : end], true
}

// AttachSocket records a new socket of the UMEM; package xsk calls it.
// When the UMEM has no bound socket, the new socket is the first: it
// gets the descriptor the UMEM is registered on (registering it again on a
// fresh socket if an earlier first socket took and closed it), owns it
// and closes it on its own Close. Otherwise it gets fd -1 and must create
// its own socket and bind with XDP_SHARED_UMEM to shared, a duplicate of
// a bound socket's descriptor that it closes after the bind (so that the
// socket cannot go away, and its number be reused, in between), inheriting
// that socket's bind flags (flags). While a first socket is attached and
// not yet bound, AttachSocket waits for it.
func (u *UMEM) AttachSocket() (fd int, shared int, flags uint16, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for u.pending >= 0 && !u.closed {
		u.cond.Wait()
	}
	if u.closed {
		return -1, -1, 0, os.ErrClosed
	}
	if sfd := u.sharedFD(); sfd >= 0 {
		dup, err := unix.FcntlInt(uintptr(sfd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return -1, -1, 0, fmt.Errorf("umem: %w", os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err))
		}
		u.sockets++
		return -1, dup, u.bound[sfd], nil
	}
	if u.fd < 0 {
		if err := u.renew(); err != nil {
			return -1, -1, 0, err
		}
	}
	fd, u.fd = u.fd, -1
	u.pending = fd
	u.sockets++
	return fd, -1, 0, nil
}

// SocketBound records that the socket on fd is bound with flags, so
// that later sockets can share the UMEM through it.
func (u *UMEM) SocketBound(fd int, flags uint16) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.bound == nil {
		u.bound = make(map[int]uint16)
	}
	u.bound[fd] = flags
	u.settle(fd)
}

// DetachSocket undoes AttachSocket before the socket on fd closes its
// descriptor.
func (u *UMEM) DetachSocket(fd int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.bound, fd)
	u.sockets--
	u.settle(fd)
}

// settle ends the wait for a pending first socket on fd.
func (u *UMEM) settle(fd int) {
	if fd >= 0 && fd == u.pending {
		u.pending = -1
		u.cond.Broadcast()
	}
}

// renew registers the UMEM on a fresh AF_XDP socket, u.fd. The pages
// are pinned again; the kernel released the old registration with its
// last socket.
func (u *UMEM) renew() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return caps.Wrap("umem: socket(AF_XDP)", caps.NetRaw, os.NewSyscallError("socket", err))
	}
	u.fd = fd
	if err := u.register(); err != nil {
		u.fd = -1
		unix.Close(fd)
		return err
	}
	return nil
}
