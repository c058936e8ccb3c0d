package csum_test

import (
	"encoding/binary"
	"fmt"

	"github.com/xdpkit/xdpkit/csum"
)

// A UDP checksum over IPv4, with the payload copied into the packet and
// summed in the same pass; the receiver's check sums to zero.
func Example() {
	src, dst := [4]byte{198, 18, 0, 1}, [4]byte{198, 18, 0, 2}
	payload := []byte("hello, world")
	udp := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))

	s := csum.PseudoHeaderIPv4(src, dst, csum.ProtoUDP, uint16(len(udp)))
	s = csum.CopyAndSum(udp[8:], payload, s) // copy and sum in one pass
	s = csum.Sum(udp[:8], s)                 // the header, checksum field 0
	binary.BigEndian.PutUint16(udp[6:], csum.FinishUDP(s))
	fmt.Printf("checksum %#04x\n", binary.BigEndian.Uint16(udp[6:]))

	check := csum.Sum(udp, csum.PseudoHeaderIPv4(src, dst, csum.ProtoUDP, uint16(len(udp))))
	fmt.Println("verifies:", csum.Finish(check) == 0)
	// Output:
	// checksum 0x73e9
	// verifies: true
}

// Every checksum of a frame built in place (Ethernet, IPv4, UDP) filled at
// once, as a transmit path does before it hands the frame over.
func ExampleFillFrame() {
	frame := make([]byte, 14+20+8+5)
	binary.BigEndian.PutUint16(frame[12:], 0x0800) // IPv4
	ip := frame[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, csum.ProtoUDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9000)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], "hello")

	if err := csum.FillFrame(frame); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("IPv4 %#04x, UDP %#04x\n", binary.BigEndian.Uint16(ip[10:]), binary.BigEndian.Uint16(udp[6:]))
	// Output:
	// IPv4 0xeea4, UDP 0x7071
}
