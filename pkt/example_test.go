package pkt_test

import (
	"fmt"
	"net/netip"

	"github.com/xdpkit/xdpkit/pkt"
)

// A UDP echo reply, written over the request in place: parse, check it is
// for us, swap, and send b[:n].
func ExampleReplyUDP() {
	b := datagram(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"),
		5000, 9000, []byte("ping"), 0, 0, 0) // as rxpath.Packet.Data holds it

	var f pkt.Frame
	if err := pkt.Parse(b, &f); err != nil || f.Proto != pkt.ProtoUDP || f.DstPort != 9000 {
		return // not for us
	}
	fmt.Printf("request %v:%d -> %v:%d %q\n", f.Src, f.SrcPort, f.Dst, f.DstPort, f.Payload(b))
	n, err := pkt.ReplyUDP(b, &f)
	if err != nil {
		return
	}
	fmt.Printf("reply   %v:%d -> %v:%d %q, %d bytes\n", f.Src, f.SrcPort, f.Dst, f.DstPort, f.Payload(b), n)
	// Output:
	// request 198.18.0.1:5000 -> 198.18.0.2:9000 "ping"
	// reply   198.18.0.2:9000 -> 198.18.0.1:5000 "ping", 46 bytes
}
