package vethns_test

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/xdpkit/xdpkit/csum"
)

// udpFrame writes an Ethernet + IPv4/IPv6 + UDP frame into b and returns
// its length. Checksums come from package csum.
func udpFrame(b []byte, srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) int {
	copy(b[0:6], dstMAC)
	copy(b[6:12], srcMAC)
	var l4 []byte
	ulen := 8 + len(payload)
	if src.Addr().Is4() {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:34]
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:], uint16(20+ulen))
		binary.BigEndian.PutUint32(ip[4:], 0x40000000) // id 0, DF
		ip[8], ip[9] = 64, 17
		ip[10], ip[11] = 0, 0
		s4, d4 := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
		l4 = b[34 : 34+ulen]
	} else {
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		ip := b[14:54]
		binary.BigEndian.PutUint32(ip[0:], 6<<28)
		binary.BigEndian.PutUint16(ip[4:], uint16(ulen))
		ip[6], ip[7] = 17, 64
		s6, d6 := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:24], s6[:])
		copy(ip[24:40], d6[:])
		l4 = b[54 : 54+ulen]
	}
	binary.BigEndian.PutUint16(l4[0:], src.Port())
	binary.BigEndian.PutUint16(l4[2:], dst.Port())
	binary.BigEndian.PutUint16(l4[4:], uint16(ulen))
	binary.BigEndian.PutUint16(l4[6:], 0)
	copy(l4[8:], payload)
	sum := pseudo(src.Addr(), dst.Addr(), 17, ulen)
	binary.BigEndian.PutUint16(l4[6:], csum.FinishUDP(csum.Sum(l4, sum)))
	if src.Addr().Is4() {
		return 34 + ulen
	}
	return 54 + ulen
}

func pseudo(src, dst netip.Addr, proto uint8, length int) uint32 {
	var buf [40]byte
	n := 0
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		n += copy(buf[n:], s[:])
		n += copy(buf[n:], d[:])
	} else {
		s, d := src.As16(), dst.As16()
		n += copy(buf[n:], s[:])
		n += copy(buf[n:], d[:])
	}
	var tail [4]byte
	binary.BigEndian.PutUint16(tail[0:], uint16(proto))
	binary.BigEndian.PutUint16(tail[2:], uint16(length))
	return csum.Sum(tail[:], csum.Sum(buf[:n], 0))
}
