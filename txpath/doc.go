// Package txpath sends packets through an AF_XDP socket by writing them
// straight into UMEM frames: no staging buffer, no per-packet allocation,
// descriptors submitted in batches with one kick.
//
// # Writing frames
//
// A [Sender] drives one socket's TX and Completion rings. The application
// either reserves a frame and writes the packet in place:
//
//	f, err := s.Next()          // f.Buf is the frame's writable memory
//	n := build(f.Buf)           // headers and payload, in place
//	err = s.Commit(f, n, txpath.Options{Checksum: true})
//
// or lets the Sender gather it from several slices: [Sender.SendFrame] for
// any frame, [Sender.SendUDP] for a UDP datagram over IPv4 or IPv6 from a
// precomputed [UDPFlow] template, the common case, whose per-packet work is
// a template copy, the payload copy (gather) and a few additions for the
// lengths and checksums.
//
// # Copy and checksum policies
//
//	Offload   checksum requested through AF_XDP TX metadata (XDP_TX_METADATA,
//	          XDP_TXMD_FLAGS_CHECKSUM; csum_start = L4 header offset,
//	          csum_offset 6 for UDP, 16 for TCP; the checksum field holds the
//	          pseudo-header sum, folded, not complemented); payload copied
//	          with NT stores from Decision.NTFrom on.
//	Software  checksum computed in the copy's pass (csum.CopyAndSum).
//	NT        NT stores forced (like MSG_NTCOPY); checksum offloaded when the
//	          Sender can, else summed from the source slices.
//	Plain     ordinary copy, no L4 checksum.
//
// [Config.Policy] sets the Sender's policy (like ethtool's tx-nocache-copy
// per interface); [Options.Policy] overrides it per send. The default,
// [Auto], is decided at New and reported with its reasons by
// [Sender.Decision]:
//
//   - Copy mode (every veth socket): NT stores never. The kernel copies the
//     frame out of the UMEM into an skb on the sending CPU during the kick,
//     so NT stores would push to memory what is read back at once.
//     Checksum: on a NIC, Offload when tx-checksumming is on (the kernel
//     marks the skb CHECKSUM_PARTIAL and the device completes it), Software
//     otherwise. On a software device (veth, netkit, tun/tap, macvlan,
//     ipvlan, bridge: [Device].Software) an offloaded checksum is never
//     finished: the frame leaves with the pseudo-header sum in its field,
//     which a kernel stack behind it trusts but an XDP program or AF_XDP
//     socket reads as it is ([csum.Verdict] Partial). Auto then sums in
//     software, or, on a UMEM registered with XDP_UMEM_TX_SW_CSUM, lets the
//     kernel sum when [ChooseTable]'s measurement says that is cheaper. An
//     explicit Offload is obeyed there, and [Decision].Warning says what an
//     XDP receiver will see.
//   - Zero-copy: Offload when the driver has the xsk tx-checksum feature
//     (the NIC reads the frame by DMA; the CPU does not read it again),
//     Software otherwise, with NT stores from [Decision].NTFrom on:
//     Config.NTThreshold when it is positive, else nt's calibration.
//
// For a one-frame datagram of [Sender.SendUDP] with the Auto policy (and
// Config.NTThreshold 0), a zero-copy Sender instead asks [ChooseCopy] which
// copy to use for the payload's size (ordinary, NT, fused
// checksum-and-copy, or a copy followed by a sum), from a table that the
// process measures once, on this
// host, when the first zero-copy Auto Sender is made (a noticeable time;
// [Prepare] does it earlier). From 256 B to 64 KiB, where the frames count
// as cold, NT stores (NT, or NT + sum), in builds that have them, are the
// answer unless the measurement finds another copy clearly quicker (see
// [ChooseCopy]). In copy mode the destination is hot and Auto
// never copies with NT stores (Stats.NTCopies stays 0; TestCopyModeNoNT),
// which leaves one answer per case: a plain copy under offload, the fused
// copy-and-sum otherwise; so a copy-mode Sender measures nothing, except
// one 1500 B point when it must choose between the fused sum and
// XDP_UMEM_TX_SW_CSUM (TestCopyModeMeasuresNothing).
//
// Offload needs a UMEM with TxMetadataLen >= umem.TxMetadataSize. The
// packet then starts TxMetadataLen (plus Config.Headroom) bytes into each
// frame, with the metadata right in front of it, as the kernel expects.
//
// # Batching
//
// Descriptors are queued until BatchSize of them are, or Flush is called.
// A flush fences the NT stores once (nt.Fence) when the batch used any,
// then publishes the whole batch with one producer-index store, kicks the
// kernel only if it set need_wakeup (and again, a bounded number of
// times, while descriptors stay on the TX ring: copy mode sends at most
// 32 frames per call, answering EAGAIN or, on older kernels, nothing),
// and reaps completions in batches back to the UMEM allocator.
//
// # Backpressure
//
// A send that finds no free frame or no TX ring entry fails at once with
// ErrNoFrames or ErrRingFull, having written and queued nothing; the caller
// may call Wait (bounded by a context) and try again. A packet is either
// queued whole or not at all, so nothing is lost or sent twice.
//
// # Multi-buffer
//
// A packet larger than one frame (jumbo frames up to Config.MaxPacket,
// 9216 bytes by default) leaves as a chain of descriptors linked by
// XDP_PKT_CONTD when the socket was bound with XDP_USE_SG; without it the
// send fails with ErrTooBig. Only the first descriptor carries the TX
// metadata, and the headers must fit in the first frame. On a UMEM
// registered with XDP_UMEM_TX_SW_CSUM the kernel (Linux 6.18) sums only the
// first buffer of a chain, so chained packets are then checksummed in
// software instead of offloaded.
package txpath
