package xdpnet_test

import (
	"context"
	"log"
	"net/netip"

	"github.com/xdpkit/xdpkit/xdpnet"
)

// An echo server on port 7 of eth0's address 198.18.0.1.
func ExampleListenUDP() {
	c, err := xdpnet.ListenUDP(context.Background(), "eth0", netip.MustParseAddrPort("198.18.0.1:7"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
			log.Print(err)
		}
	}
}

// Batches: read what is ready, answer it all.
func ExampleUDPConn_ReadBatch() {
	c, err := xdpnet.ListenUDP(context.Background(), "eth0", netip.MustParseAddrPort("[2001:db8::1]:7"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ms := make([]xdpnet.Message, 64)
	for i := range ms {
		ms[i].Buf = make([]byte, 1500)
	}
	for {
		n, err := c.ReadBatch(ms)
		if err != nil {
			log.Fatal(err)
		}
		out := ms[:n]
		for i := range out {
			out[i].Buf = out[i].Buf[:out[i].N]
		}
		if _, err := c.WriteBatch(out); err != nil {
			log.Print(err)
		}
		for i := range out {
			out[i].Buf = out[i].Buf[:cap(out[i].Buf)]
		}
	}
}
