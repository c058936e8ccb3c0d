package umem

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/caps"
)

// Constants of include/uapi/linux/if_xdp.h that golang.org/x/sys lacks.
const (
	xdpPacketHeadroom   = 256
	umemUnalignedChunks = 1 << 0 // XDP_UMEM_UNALIGNED_CHUNK_FLAG (5.4)
	umemTxSwCsum        = 1 << 1 // XDP_UMEM_TX_SW_CSUM (6.8)
	umemTxMetadataLen   = 1 << 2 // XDP_UMEM_TX_METADATA_LEN (6.11)
	sizeofUmemReg       = 32
	sizeofUmemRegNoFlg  = 24
)

// umemReg is struct xdp_umem_reg with tx_metadata_len (Linux 6.8).
type umemReg struct {
	Addr          uint64
	Len           uint64
	ChunkSize     uint32
	Headroom      uint32
	Flags         uint32
	TxMetadataLen uint32
}

var _ [sizeofUmemReg]byte = [unsafe.Sizeof(umemReg{})]byte{}

func (u *UMEM) register() error {
	reg := umemReg{
		Addr:          uint64(uintptr(unsafe.Pointer(&u.mem[0]))),
		Len:           uint64(len(u.mem)),
		ChunkSize:     u.frameSize,
		Headroom:      u.headroom,
		Flags:         u.flags,
		TxMetadataLen: u.metaLen,
	}
	// Without flags or metadata, the original struct (every kernel reads
	// it); otherwise the full 32 bytes (a kernel reads anything shorter
	// as the original struct and ignores the flags).
	size := uintptr(sizeofUmemReg)
	if u.flags == 0 && u.metaLen == 0 {
		size = sizeofUmemRegNoFlg
	}
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(u.fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), size, 0)
	if e == 0 {
		return nil
	}
	err := os.NewSyscallError("setsockopt(XDP_UMEM_REG)", e)
	switch {
	case errors.Is(e, unix.ENOBUFS) || errors.Is(e, unix.EPERM):
		// Without CAP_IPC_LOCK the pages are charged to RLIMIT_MEMLOCK.
		var lim unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
		return &caps.Error{
			Op:  fmt.Sprintf("umem: register %d bytes (RLIMIT_MEMLOCK %d)", len(u.mem), lim.Cur),
			Cap: caps.IPCLock,
			Err: err,
		}
	case errors.Is(e, unix.EINVAL) && u.flags&umemUnalignedChunks != 0 && !u.pow2:
		return fmt.Errorf("%w: the kernel refused unaligned chunks of %d bytes: %w", ErrFrameSize, u.frameSize, err)
	case errors.Is(e, unix.EINVAL) && u.flags&(umemTxMetadataLen|umemTxSwCsum) != 0:
		return fmt.Errorf("%w: TX metadata (XDP_UMEM_TX_METADATA_LEN, Linux 6.11) or XDP_UMEM_TX_SW_CSUM (6.8): %w", ErrNotSupported, err)
	}
	return fmt.Errorf("umem: %w", err)
}

// TxMetadataSize is the size of struct xsk_tx_metadata on Linux 6.18
// (flags, then the request union: csum_start, csum_offset, launch_time).
const TxMetadataSize = 24

// Flags of TxMetadata.Flags (XDP_TXMD_FLAGS_*).
const (
	TxMetadataTimestamp  = 1 << 0 // XDP_TXMD_FLAGS_TIMESTAMP
	TxMetadataChecksum   = 1 << 1 // XDP_TXMD_FLAGS_CHECKSUM
	TxMetadataLaunchTime = 1 << 2 // XDP_TXMD_FLAGS_LAUNCH_TIME
)

// TxMetadata is struct xsk_tx_metadata as a TX request: the kernel reads it
// at desc.addr - TxMetadataLen when the descriptor carries XDP_TX_METADATA.
// With TxMetadataChecksum the device (or, with TxSwCsum, the kernel) sums
// the packet from CsumStart to its end and stores the result at
// CsumStart+CsumOffset; that field must hold the pseudo-header sum.
type TxMetadata struct {
	Flags      uint64
	CsumStart  uint16
	CsumOffset uint16
	_          uint32
	LaunchTime uint64
}

var _ [TxMetadataSize]byte = [unsafe.Sizeof(TxMetadata{})]byte{}

// TxMetadataAt returns the TX metadata area in front of the packet at
// addr, or nil when the UMEM has no metadata area or addr leaves no room
// for it in its frame.
func (u *UMEM) TxMetadataAt(addr uint64) *TxMetadata {
	if u.metaLen < TxMetadataSize || addr >= uint64(len(u.mem)) || addr-u.Base(addr) < uint64(u.metaLen) {
		return nil
	}
	return (*TxMetadata)(unsafe.Pointer(&u.mem[addr-uint64(u.metaLen)]))
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
