// Package umem provides UMEM: the packet memory that an AF_XDP socket shares
// with the kernel.
//
// A UMEM is one mapping outside the Go heap, page aligned (optionally on
// 2 MiB huge pages), cut into equal frames ("chunks") of a power of two
// from 2048 bytes to the page size (or, unaligned, any size from 2048)
// and registered with the kernel through XDP_UMEM_REG on an AF_XDP socket.
// Frames are named by their offset ("address") in the UMEM; descriptors on
// the four AF_XDP rings carry these addresses, never pointers.
//
// With Config.Unaligned (XDP_UMEM_UNALIGNED_CHUNK_FLAG) a descriptor may
// name any address and a packet may cross frames; RX descriptors then
// carry the data's offset in their upper 16 bits, which ExtractAddr,
// ExtractOffset and AddOffsetToAddr take apart.
//
// Each frame may begin with a TX metadata area (XDP_UMEM_TX_METADATA_LEN):
// the kernel looks for a [TxMetadata] immediately before the packet, at
// desc.addr - TxMetadataLen, so a frame that carries metadata must leave that
// much headroom in front of its data.
//
// # Frame ownership and accounting
//
// Every frame is always in exactly one place:
//
//	Free     in the allocator (Get / Put)
//	Held     owned by the application (after Get, after RX, after a completion)
//	Fill     on a fill ring, lent to the kernel for receiving
//	TX       on a TX ring, lent to the kernel for sending
//
// The allocator is O(1) per frame with batch variants, allocates nothing,
// and detects double frees. Package xsk reports ring crossings with
// [UMEM.Moved], so [UMEM.Accounting] can show at any time where every frame
// is, and a test can assert that none leaked: after a clean shutdown
// Accounting().Free == Accounting().Total. Frames the kernel never gives
// back stay counted on their ring: TX descriptors it rejects (counted in
// XDP_STATISTICS tx_invalid_descs: an address or length outside the UMEM,
// OptContd without multi-buffer), and frames it still held when its
// socket's interface went away; the Close of a txpath.Sender or an
// rxpath.Poller returns the latter once the socket is closed, whichever
// of the two closes first (their Reclaim does it on demand).
//
// # Lifetime
//
// The first socket created on a UMEM takes the descriptor the UMEM was
// registered on; further sockets share the UMEM through a bound socket
// (XDP_SHARED_UMEM). Every socket closes its own descriptor, so closing a
// socket always unbinds its queue at once. When the last socket has
// closed, the next one registers the UMEM again on a fresh descriptor.
// Close the sockets first, then the UMEM, as plain defers do (the UMEM is
// made first): Close fails with ErrBusy while sockets still use it, and is
// idempotent afterwards. After Close, every
// slice returned by Frame or Bytes is invalid.
package umem
