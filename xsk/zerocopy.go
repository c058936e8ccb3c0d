package xsk

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/netdev"
)

// zeroCopyRefusal says why the kernel refused a zero-copy bind (ModeZeroCopy)
// on ifname, from what the device reports and the errno. The kernel's
// xp_assign_dev (net/xdp/xsk_buff_pool.c) answers EOPNOTSUPP when the
// driver does not advertise NETDEV_XDP_ACT_XSK_ZEROCOPY (before Linux 6.3:
// when it lacks ndo_xsk_wakeup) or cannot take multi-buffer packets in
// zero-copy (xdp_zc_max_segs 1 with XDP_USE_SG), and passes on the
// driver's own refusal of XDP_SETUP_XSK_POOL, EINVAL on virtio_net when
// its virtqueues do not use the DMA API (the device lacks
// VIRTIO_F_ACCESS_PLATFORM: QEMU's iommu_platform=on) or the queue is not
// one of its current queue pairs. "" leaves the error to bindError.
func zeroCopyRefusal(ifname string, queue int, c *Config, err error) string {
	if c.MultiBuffer && errors.Is(err, unix.EINVAL) {
		return "" // XDP_USE_SG itself refused (before Linux 6.6): bindError says so
	}
	const copyCost = "; ModeAuto or ModeCopy binds in copy mode, where the kernel copies every frame once between the driver's buffers and the UMEM"
	info, derr := netdev.Get(ifname)
	if derr != nil {
		return fmt.Sprintf("the kernel refused zero-copy and the device could not be read (%v)%s", derr, copyCost)
	}
	drv := info.Driver
	if drv == "" {
		drv = info.Kind
	}
	known := info.FeaturesFrom == "netdev-genl"
	switch {
	case known && info.XDPFeatures&netdev.XDPXSKZeroCopy == 0:
		return fmt.Sprintf("driver %s does not advertise AF_XDP zero-copy (xdp-features %s)%s", drv, info.XDPFeatures, copyCost)
	case !known && errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Sprintf("driver %s refused zero-copy (before Linux 6.3 the kernel does not say which drivers have it)%s", drv, copyCost)
	case c.MultiBuffer && errors.Is(err, unix.EOPNOTSUPP) && info.XDPZeroCopyMaxSegs <= 1:
		return fmt.Sprintf("driver %s takes one buffer per packet in zero-copy (zero-copy max segments %d), so multi-buffer (XDP_USE_SG) needs copy mode", drv, info.XDPZeroCopyMaxSegs)
	case queue >= max(info.RxQueues, info.TxQueues) && max(info.RxQueues, info.TxQueues) > 0:
		return fmt.Sprintf("queue %d is not one of the %d queues in use on %s", queue, max(info.RxQueues, info.TxQueues), ifname)
	case errors.Is(err, unix.EINVAL) && drv == "virtio_net":
		return "virtio_net could not map the UMEM for DMA: its virtqueues must use the DMA API (the device needs VIRTIO_F_ACCESS_PLATFORM, QEMU's iommu_platform=on) and the queue must be one of its current queue pairs (ethtool -L combined)" + copyCost
	case errors.Is(err, unix.EINVAL):
		return fmt.Sprintf("driver %s refused the UMEM for zero-copy (DMA mapping, frame size or headroom it cannot use)%s", drv, copyCost)
	default:
		return fmt.Sprintf("driver %s refused zero-copy%s", drv, copyCost)
	}
}

// stockFill lends frames to the Fill ring of a zero-copy socket that has
// no RX ring. In zero-copy mode the driver takes every receive buffer of
// its queue from the UMEM's Fill ring (xsk_buff_alloc), also for the
// packets that the XDP program passes to the kernel, which copies them into
// an skb and recycles the buffer inside the kernel's pool. A socket that
// never fills its ring starves the queue's receive side: ARP, the host's
// own traffic and the replies a sender waits for are then lost. The frames
// stay lent until Close, which gives them back to the UMEM.
func (s *Socket) stockFill(c *Config) error {
	n := max(1, min(int(c.FillSize), int(s.umem.FrameCount()/4), zeroCopyStock))
	addrs := make([]uint64, n)
	got := s.umem.GetBatch(addrs)
	if got == 0 {
		return fmt.Errorf("xsk: zero-copy on %s queue %d: no free UMEM frame to stock the Fill ring of a socket without RX ring (the driver takes its receive buffers from it)", s.ifname, s.queue)
	}
	k := s.fill.Produce(addrs[:got])
	if k < got {
		if err := s.umem.PutBatch(addrs[k:got]); err != nil {
			return fmt.Errorf("xsk: %w", err)
		}
	}
	s.stocked, s.stockAddrs = k, addrs[:k]
	// The driver found the ring empty when the bind set its queue up and
	// asked to be woken (need_wakeup) once it has frames. recvfrom would
	// not wake it: the kernel answers ENOBUFS for a socket without RX
	// ring before it gets there. poll(2) does (xsk_poll wakes the driver
	// for the need_wakeup flags it has cached).
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("xsk: %s queue %d: waking the driver for the Fill ring's stock: %w", s.ifname, s.queue, os.NewSyscallError("poll", err))
		}
		return nil
	}
}

// zeroCopyStock bounds the frames stockFill lends: a driver's receive
// ring rarely holds more, and passed packets' buffers are recycled.
const zeroCopyStock = 1024

// Stocked returns how many frames New lent to the Fill ring of a
// zero-copy socket without RX ring (0 for any other socket). They come
// back to the UMEM when the socket closes.
func (s *Socket) Stocked() int { return s.stocked }
