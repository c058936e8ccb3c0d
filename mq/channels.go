package mq

import "github.com/xdpkit/xdpkit/internal/netdev"

// ChannelCounts are a device's channel counts (ethtool -l): the maxima the
// driver allows and the counts in use. Drivers report separate RX and TX
// channels (veth), combined ones (most NICs), or both.
type ChannelCounts struct {
	MaxRX, MaxTX, MaxOther, MaxCombined int
	RX, TX, Other, Combined             int
}

// Queues is how many RX queues a socket can bind to: combined plus RX-only
// channels.
func (c ChannelCounts) Queues() int { return c.Combined + c.RX }

// Channels reads the channel counts of the interface called ifname in the
// calling thread's namespace (ETHTOOL_GCHANNELS).
func Channels(ifname string) (ChannelCounts, error) {
	c, err := netdev.GetChannels(ifname)
	return ChannelCounts(c), err
}

// SetChannels sets the number of queues of ifname to n where the driver
// allows it (ETHTOOL_SCHANNELS): combined channels when the driver has
// them, RX and TX channels otherwise (veth, up to the queues it was
// created with). It returns the counts read back. It needs CAP_NET_ADMIN.
// Set the channels before Open: changing them tears down the queues'
// sockets in most drivers.
func SetChannels(ifname string, n int) (ChannelCounts, error) {
	c, err := netdev.SetQueues(ifname, n)
	return ChannelCounts(c), err
}
