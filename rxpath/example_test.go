package rxpath_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// A budgeted poller over one queue, until SIGINT. Small packets arrive as
// copies, large ones lent from the UMEM, valid until the handler returns.
func Example() {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096})
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close()
	sock, err := xsk.New("eth0", 0, u, &xsk.Config{NoTX: true})
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	prog, err := xsk.AttachProgram("eth0", &xsk.ProgramConfig{Filter: &xsk.Filter{DstPorts: []uint16{9000}}})
	if err != nil {
		log.Fatal(err)
	}
	defer prog.Close()
	if err := prog.Register(sock); err != nil {
		log.Fatal(err)
	}
	p, err := rxpath.New(nil, sock)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close() // before the socket's Close: its frames come back then

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT)
	defer stop()
	err = p.Run(ctx, rxpath.HandlerFunc(func(pkt *rxpath.Packet) {
		fmt.Printf("%d bytes on queue %d\n", pkt.Len, pkt.Socket.Queue())
	}))
	st, _ := p.Stats()
	fmt.Println(err, st.String())
}
