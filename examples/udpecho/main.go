package main

import (
	"context"
	"flag"
	"log"
	"os/signal"
	"syscall"

	"github.com/xdpkit/xdpkit/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

func main() {
	dev, queue, port := flag.String("dev", "eth0", "interface"), flag.Int("queue", 0, "queue"), flag.Uint("port", 9000, "UDP port")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dev, *queue, uint16(*port)); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dev string, queue int, port uint16) error {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096})
	if err != nil {
		return err
	}
	defer u.Close()
	sock, err := xsk.New(dev, queue, u, nil)
	if err != nil {
		return err
	}
	defer sock.Close()
	filter := &xsk.Filter{IPv4UDP: true, IPv6UDP: true, DstPorts: []uint16{port}}
	prog, err := xsk.AttachProgram(dev, &xsk.ProgramConfig{Filter: filter})
	if err != nil {
		return err
	}
	defer prog.Close()
	if err := prog.Register(sock); err != nil {
		return err
	}
	s, err := txpath.New(sock, &txpath.Config{Policy: txpath.Plain}) // ReplyUDP sums
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := rxpath.New(nil, sock)
	if err != nil {
		return err
	}
	defer p.Close()
	var f pkt.Frame
	return p.Run(ctx, rxpath.HandlerFunc(func(rp *rxpath.Packet) {
		if pkt.Parse(rp.Data, &f) != nil || f.Proto != pkt.ProtoUDP || f.DstPort != port {
			return
		}
		if n, err := pkt.ReplyUDP(rp.Data, &f); err == nil && s.SendFrame(txpath.Options{}, rp.Data[:n]) == nil {
			_ = s.Flush() // a full ring drops the reply, as UDP may
		}
	}))
}
