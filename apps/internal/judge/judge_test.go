package judge_test

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xdpkit/xdpkit/apps/internal/judge"
)

// TestFrame: a TCP SYN that gopacket built passes; with any byte of its
// IP or TCP header or payload changed it fails.
func TestFrame(t *testing.T) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
	tcp := &layers.TCP{SrcPort: 1234, DstPort: 80, Seq: 7, SYN: true, Window: 64240}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, eth, ip, tcp, gopacket.Payload("abcd")); err != nil {
		t.Fatal(err)
	}
	f := buf.Bytes()
	r, err := judge.Frame(f)
	if err != nil || r.TCP == nil || r.SPort != 1234 || r.Dst != "198.18.0.2" {
		t.Fatalf("%+v, %v", r, err)
	}
	for i := 14; i < 14+44; i++ { // the IP packet; the rest is padding
		if i == 14+2 || i == 14+3 || i == 34+12 {
			continue // lengths and data offset: a decode error or not, but never both right
		}
		g := append([]byte(nil), f...)
		g[i] ^= 0x10
		if _, err := judge.Frame(g); err == nil {
			t.Errorf("byte %d changed: no error", i)
		}
	}
}
