package pkt

import "github.com/xdpkit/xdpkit/pkt"

// EtherTypes and IP protocol numbers.
const (
	EtherTypeIPv4 = pkt.EtherTypeIPv4
	EtherTypeARP  = pkt.EtherTypeARP
	EtherTypeVLAN = pkt.EtherTypeVLAN
	EtherTypeQinQ = pkt.EtherTypeQinQ
	EtherTypeIPv6 = pkt.EtherTypeIPv6

	ProtoICMP   = pkt.ProtoICMP
	ProtoTCP    = pkt.ProtoTCP
	ProtoUDP    = pkt.ProtoUDP
	ProtoICMPv6 = pkt.ProtoICMPv6
)

// Errors from Parse.
var (
	ErrShort     = pkt.ErrShort
	ErrMalformed = pkt.ErrMalformed
)

// Frame is pkt.Frame.
type Frame = pkt.Frame

// Parse is pkt.Parse.
func Parse(b []byte, f *Frame) error { return pkt.Parse(b, f) }

// DecTTL is pkt.DecTTL.
func DecTTL(b []byte, f *Frame) bool { return pkt.DecTTL(b, f) }

// SetMACs is pkt.SetMACs.
func SetMACs(b []byte, dst, src [6]byte) { pkt.SetMACs(b, dst, src) }
