package umem

import (
	"fmt"
	"os"
)

// In an unaligned UMEM (Config.Unaligned) the kernel hands out RX
// descriptors whose address is the address of the buffer the Fill ring
// gave in the lower 48 bits and the data's offset from it in the upper 16
// (include/uapi/linux/if_xdp.h: XSK_UNALIGNED_BUF_OFFSET_SHIFT); TX and
// Fill accept either form. The helpers below are libxdp's
// xsk_umem__extract_addr, xsk_umem__extract_offset and
// xsk_umem__add_offset_to_addr. In an aligned UMEM the upper bits are
// always 0 and the helpers change nothing.
const (
	// UnalignedOffsetShift is XSK_UNALIGNED_BUF_OFFSET_SHIFT.
	UnalignedOffsetShift = 48
	// UnalignedAddrMask is XSK_UNALIGNED_BUF_ADDR_MASK.
	UnalignedAddrMask = 1<<UnalignedOffsetShift - 1
)

// ExtractAddr returns the buffer address of a descriptor address: what to
// give back to the Fill ring.
func ExtractAddr(addr uint64) uint64 { return addr & UnalignedAddrMask }

// ExtractOffset returns the offset a descriptor address carries in its
// upper bits.
func ExtractOffset(addr uint64) uint64 { return addr >> UnalignedOffsetShift }

// AddOffsetToAddr returns the address of the data a descriptor names:
// its buffer address plus the offset it carries.
func AddOffsetToAddr(addr uint64) uint64 { return ExtractAddr(addr) + ExtractOffset(addr) }

// EncodeAddr returns a descriptor address with base in the lower bits and
// offset in the upper ones. offset must be below 1<<16.
func EncodeAddr(base, offset uint64) uint64 {
	return base&UnalignedAddrMask | offset<<UnalignedOffsetShift
}

// Unaligned reports whether the UMEM was registered with
// XDP_UMEM_UNALIGNED_CHUNK_FLAG.
func (u *UMEM) Unaligned() bool { return u.flags&umemUnalignedChunks != 0 }

// minFrameSize is XDP_UMEM_MIN_CHUNK_SIZE.
const minFrameSize = 2048

// checkFrameSize validates a chunk size: from 2048 to the page size, as
// the kernel requires (xdp_umem_reg refuses a chunk_size above
// PAGE_SIZE, unaligned or not); aligned chunks are also powers of two.
func checkFrameSize(size uint32, unaligned bool) error {
	if size < minFrameSize {
		return fmt.Errorf("%w: got %d", ErrFrameSize, size)
	}
	if int64(size) > int64(os.Getpagesize()) {
		return fmt.Errorf("%w: got %d (page size %d)", ErrFrameSize, size, os.Getpagesize())
	}
	if unaligned {
		return nil
	}
	if size&(size-1) != 0 {
		return fmt.Errorf("%w: got %d (page size %d)", ErrFrameSize, size, os.Getpagesize())
	}
	return nil
}
