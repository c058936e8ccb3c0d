package judge

import (
	"bytes"
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Result is what Frame read from a frame with gopacket alone.
type Result struct {
	VLANs        []uint16            // VLAN IDs, outer first
	TPIDs        []uint16            // each tag's TPID (0x8100, 0x88a8), outer first
	EtherType    layers.EthernetType // after the tags
	Src, Dst     string
	Proto        string
	SPort, DPort uint16
	TCP          *layers.TCP
	ICMPID       uint16
	ICMPSeq      uint16
	ICMPType     uint8
	Payload      []byte
}

// Frame decodes an Ethernet frame with gopacket and checks its IPv4
// header, UDP, TCP, ICMP and ICMPv6 checksums by serializing the decoded
// layers again with gopacket's own checksum code: any field that differs
// is an error. The Result's slices point into frame.
func Frame(frame []byte) (j Result, err error) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
	// An error past the transport layer (a payload gopacket takes for an
	// application protocol by its port) or in an EtherType it does not
	// know is not the frame's.
	past := p.TransportLayer() != nil || p.Layer(layers.LayerTypeICMPv4) != nil || p.Layer(layers.LayerTypeICMPv6Echo) != nil
	if e := p.ErrorLayer(); e != nil && !past && isIP(frame) {
		return j, fmt.Errorf("decode: %v", e.Error())
	}
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth == nil {
		return j, fmt.Errorf("no Ethernet layer")
	}
	j.EtherType = eth.EthernetType
	var net gopacket.NetworkLayer
	var ser []gopacket.SerializableLayer
	start, off := -1, 0
	for _, l := range p.Layers() {
		if start < 0 {
			off += len(l.LayerContents())
		}
		switch l := l.(type) {
		case *layers.Dot1Q:
			// The TPID of a tag is the EtherType before it.
			j.VLANs = append(j.VLANs, l.VLANIdentifier)
			j.TPIDs = append(j.TPIDs, uint16(j.EtherType))
			j.EtherType = l.Type
		case *layers.IPv4:
			net, start = l, off-len(l.Contents)
			j.Src, j.Dst, j.Proto = l.SrcIP.String(), l.DstIP.String(), l.Protocol.String()
			ser = append(ser, l)
		case *layers.IPv6:
			net, start = l, off-len(l.Contents)
			j.Src, j.Dst, j.Proto = l.SrcIP.String(), l.DstIP.String(), l.NextHeader.String()
			ser = append(ser, l)
		case *layers.UDP:
			l.SetNetworkLayerForChecksum(net)
			j.SPort, j.DPort, j.Payload = uint16(l.SrcPort), uint16(l.DstPort), l.Payload
			ser = append(ser, l, gopacket.Payload(l.Payload))
		case *layers.TCP:
			l.SetNetworkLayerForChecksum(net)
			j.SPort, j.DPort, j.TCP, j.Payload = uint16(l.SrcPort), uint16(l.DstPort), l, l.Payload
			ser = append(ser, l, gopacket.Payload(l.Payload))
		case *layers.ICMPv4:
			j.ICMPID, j.ICMPSeq, j.ICMPType, j.Payload = l.Id, l.Seq, l.TypeCode.Type(), l.Payload
			ser = append(ser, l, gopacket.Payload(l.Payload))
		case *layers.ICMPv6:
			l.SetNetworkLayerForChecksum(net)
			j.ICMPType = l.TypeCode.Type()
			ser = append(ser, l)
		case *layers.ICMPv6Echo:
			j.ICMPID, j.ICMPSeq, j.Payload = l.Identifier, l.SeqNumber, l.Payload
			ser = append(ser, l, gopacket.Payload(l.Payload))
		}
	}
	if start < 0 {
		return j, nil // not IP: nothing to sum
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ser...); err != nil {
		return j, fmt.Errorf("serialize: %w", err)
	}
	// Ethernet padding past the IP packet is not compared.
	if got, want := frame[start:min(len(frame), start+len(buf.Bytes()))], buf.Bytes(); !bytes.Equal(got, want) {
		return j, fmt.Errorf("checksums or lengths differ from gopacket's:\n got %x\nwant %x", got, want)
	}
	return j, nil
}

// isIP: the frame's EtherType (after VLAN tags) is IPv4 or IPv6.
func isIP(f []byte) bool {
	off := 12
	for len(f) >= off+2 && (f[off] == 0x81 && f[off+1] == 0 || f[off] == 0x88 && f[off+1] == 0xa8) {
		off += 4
	}
	return len(f) >= off+2 && (f[off] == 0x08 && f[off+1] == 0 || f[off] == 0x86 && f[off+1] == 0xdd)
}
