package xsk

import "github.com/xdpkit/xdpkit/internal/netdev"

// DeviceInfo is what xdpkit knows of a network device: driver, queue
// counts, MTU, TX checksum offload, and the XDP and AF_XDP features the
// kernel reports (netdev generic netlink, ethtool otherwise).
type DeviceInfo = netdev.Info

// Device returns the facts of the interface named name, in the calling
// thread's network namespace.
func Device(name string) (DeviceInfo, error) { return netdev.Get(name) }

// queueCount returns the number of queues of ifname that can take a
// socket: the larger of its RX and TX queue counts.
func queueCount(ifname string) (int, error) {
	info, err := netdev.Get(ifname)
	if err != nil {
		return 0, err
	}
	return max(info.RxQueues, info.TxQueues), nil
}
