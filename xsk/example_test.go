package xsk_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// The four rings by hand: lend frames to the kernel on the Fill ring, take
// received packets off the RX ring, and give their frames back. Package
// rxpath does this for you, in batches and without allocating.
func Example() {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096})
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close() // last: plain defers close in the right order
	sock, err := xsk.New("eth0", 0, u, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	prog, err := xsk.AttachProgram("eth0", &xsk.ProgramConfig{
		Filter: &xsk.Filter{IPv4UDP: true, IPv6UDP: true, DstPorts: []uint16{9000}}})
	if err != nil {
		log.Fatal(err)
	}
	defer prog.Close()
	if err := prog.Register(sock); err != nil {
		log.Fatal(err)
	}

	frames := make([]uint64, 64)
	sock.Fill().Produce(frames[:u.GetBatch(frames)])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	descs := make([]xsk.Desc, 64)
	for sock.WaitRX(ctx) == nil {
		for _, d := range descs[:sock.RX().Consume(descs)] {
			b, _ := u.Data(d.Addr, d.Len)
			fmt.Printf("%d bytes from %x\n", len(b), b[6:12])
			frames[0] = u.Base(d.Addr)
			sock.Fill().Produce(frames[:1])
		}
		_ = sock.KickRX() // a system call only if the kernel ran out of frames
	}
}

// The facts xdpkit uses about a device, and its MAC address.
func ExampleDevice() {
	info, err := xsk.Device("eth0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.HardwareAddr, info.Driver, info.RxQueues, info.TxCsumOffload, info.XDPFeatures)
}

// The kernel's NAPI deferral on a receiving device for as long as a
// receiver runs: packets reach the RX ring in batches, at most 200µs late,
// and a receiver that sleeps wakes once per batch.
func ExampleSetNAPIDeferral() {
	prog, err := xsk.AttachProgram("eth0", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer prog.Close()
	c, err := xsk.SetNAPIDeferral("eth0", xsk.NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Restore() // before prog.Close: veth's NAPI instances go with the program
	fmt.Println("NAPI deferral set via", c.Via())
	// ... register sockets with prog, receive ...
}
