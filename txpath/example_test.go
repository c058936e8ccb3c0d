package txpath_test

import (
	"context"
	"log"
	"net/netip"
	"time"

	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// UDP datagrams written straight into UMEM frames from a precomputed flow
// template, queued in batches and flushed with one kick.
func Example() {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096, TxMetadataLen: umem.TxMetadataSize})
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close()
	sock, err := xsk.New("eth0", 0, u, &xsk.Config{NoRX: true})
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	s, err := txpath.New(sock, nil) // Auto: offload or software checksum, NT stores where they pay
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	log.Println(s.Decision())

	dstMAC := []byte{0x02, 0, 0, 0, 0, 2} // the next hop's
	flow, err := txpath.NewUDPFlow(sock.HardwareAddr(), dstMAC,
		netip.MustParseAddrPort("198.18.0.1:40000"), netip.MustParseAddrPort("198.18.0.2:9000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 1000; i++ {
		for s.SendUDP(flow, txpath.Options{}, []byte("hello, "), []byte("world")) != nil {
			if err := s.Wait(ctx); err != nil { // no frame or ring entry free yet
				log.Fatal(err)
			}
		}
	}
	if err := s.Drain(ctx); err != nil { // flush, and wait for the completions
		log.Fatal(err)
	}
}

// A packet built in place: reserve a frame, write into it, commit. A
// Commit that fails gives the frame back.
func ExampleSender_Next() {
	var s *txpath.Sender // from txpath.New
	f, err := s.Next()
	if err != nil {
		return // ErrNoFrames or ErrRingFull: Wait, then try again
	}
	n := copy(f.Buf, buildFrame())
	if err := s.Commit(f, n, txpath.Options{Checksum: true}); err != nil {
		log.Print(err) // not a well-formed packet; the frame is free again
	}
	_ = s.Flush()
}

// buildFrame stands for the application's code that writes a frame.
func buildFrame() []byte { return nil }
