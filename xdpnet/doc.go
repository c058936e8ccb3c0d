// Package xdpnet provides a UDP socket over AF_XDP sockets: a
// net.PacketConn that Go's UDP servers take as it is (miekg/dns's
// dns.Server{PacketConn: c}, quic-go's quic.Listen(c, ...)), for IPv4 or
// IPv6, on every receive queue of an interface.
//
//	c, err := xdpnet.ListenUDP(ctx, "eth0", netip.MustParseAddrPort("198.18.0.1:53"), nil)
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	buf := make([]byte, 1500)
//	for {
//		n, from, err := c.ReadFromUDPAddrPort(buf)
//		if err != nil {
//			return err
//		}
//		c.WriteToUDPAddrPort(buf[:n], from)
//	}
//
// # What goes where
//
// ListenUDP attaches xdpkit's XDP program to the interface with a filter
// that redirects UDP datagrams to the bound address and port, and nothing
// else, into one AF_XDP socket per receive queue. Everything else stays
// with the kernel: ARP, neighbour discovery, ICMP, other ports, the
// interface's other addresses (also those added later), broadcast,
// multicast and traffic the host forwards. Each queue has its own UMEM, an rxpath.Poller on a
// goroutine of its own, and a txpath.Sender.
//
// ListenUDP also binds a kernel UDP socket to the same address and port.
// It reserves the port, and it carries what the AF_XDP path does not:
//
//   - IP fragments and IPv6 packets with extension headers: the XDP
//     program passes them to the kernel, which reassembles them and
//     delivers the datagram to the kernel socket; ReadFrom returns it like
//     any other (Stats.KernelReceived). Datagrams with IPv4 options come
//     through the AF_XDP sockets.
//   - Datagrams to a destination whose next hop has no usable entry in
//     the kernel's neighbour table: the kernel resolves the neighbour and
//     sends the datagram, and the next ones go through AF_XDP once the
//     entry is there. None is dropped for want of a MAC address.
//   - Datagrams longer than the MTU (the kernel fragments them) or a UMEM
//     frame, and to destinations routed through another interface.
//
// Stats.KernelSent counts the datagrams sent this way.
//
// # Receiving
//
// Each queue's poller copies every redirected frame into a slot of the
// conn's read buffer (Config.ReadBuffer datagrams, like SO_RCVBUF) and
// checks it before a reader sees it: one whole UDP datagram to the bound
// address and port, lengths consistent, the IPv4 header checksum and the
// UDP checksum right. A UDP checksum that holds only the pseudo-header
// sum is accepted on software devices such as veth, where a peer that
// offloads its checksums leaves it so and its kernel would accept it
// too; elsewhere it counts as wrong. Frames that fail are counted
// (Stats.Malformed, NotOurs, BadChecksum) and never returned. The
// datagrams of a poll round become readable together at the end of the
// round. ReadBatch takes several at once.
//
// # Sending
//
// A write builds the Ethernet, IP and UDP headers in a UMEM frame, copies
// the payload after them, and has the Sender fill the checksums by the
// device's rules (complete in software on veth and other copy-mode
// devices, offloaded where the device finishes them). The source MAC
// address is the interface's; the destination MAC address is the next
// hop's, from the kernel's routes and neighbour table, read through
// rtnetlink, cached, and read again when the kernel announces a change
// of a neighbour, a route or the interface. The datagrams go to the
// kernel in batches: a write queues its datagram and the conn hands the
// queue to the kernel once the goroutines that are ready to run have had
// their turn (or at once when a batch is full), so that a server answering
// many requests at once makes one system call for many replies. A write
// returns once its datagram is queued; it blocks only while the TX ring
// is full.
//
// # Deadlines and Close
//
// Deadlines behave as the net package's: a read or write after its
// deadline, or blocked when the deadline passes, fails with a
// *net.OpError whose error is os.ErrDeadlineExceeded (its Timeout is
// true), and moving a deadline wakes or keeps blocked callers as it
// should. Close wakes blocked reads and writes with net.ErrClosed, sends
// what is queued, detaches the XDP program, closes the sockets and
// releases the UMEMs, and reports ErrFramesLost if a frame did not come
// back.
//
// # Limits
//
// One UDPConn per interface (an interface has one XDP program). The
// address must be one of the interface's; the conn does not serve the
// unspecified address. Frames of up to 4096 bytes: interfaces with an MTU
// above about 3800 bytes are refused (ErrMTU).
package xdpnet
