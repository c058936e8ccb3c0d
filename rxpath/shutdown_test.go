package rxpath_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
)

// TestNaturalShutdown: a UMEM with only as many frames as a Fill ring
// holds still leaves frames for a Sender on the same socket (the poller
// takes half by default), and closing in the reverse order of creation,
// as plain defers do (Sender, Poller, program, socket, UMEM), gives every
// frame back, with no error from any Close. A Sender closed after its
// socket is fine too.
func TestNaturalShutdown(t *testing.T) {
	for _, senderLast := range []bool{false, true} {
		b := newBed(t, bedConfig{frames: 2048}) // Fill ring: 2048 entries
		var got atomic.Int64
		stop := b.run(rxpath.HandlerFunc(func(*rxpath.Packet) { got.Add(1) }))

		// Receive a few datagrams.
		conn := newSender(t, b.b, b.pair.A.AddrPort4(port), 1)
		if err := conn.send(32, 100, 8, &got, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); got.Load() < 32 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if got.Load() < 32 {
			t.Fatalf("received %d of 32", got.Load())
		}

		// Send a few from the same socket while the poller holds its Fill ring.
		rx, err := b.b.ListenUDP(b.pair.B.AddrPort4(port))
		if err != nil {
			t.Fatal(err)
		}
		defer rx.Close()
		s, err := txpath.New(b.socks[0], &txpath.Config{Policy: txpath.Software, Device: &txpath.Device{}})
		if err != nil {
			t.Fatal(err)
		}
		flow, err := txpath.NewUDPFlow(b.pair.A.MAC, b.pair.B.MAC, b.pair.A.AddrPort4(port), b.pair.B.AddrPort4(port), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 16; i++ {
			if err := s.SendUDP(flow, txpath.Options{}, []byte("reply")); err != nil {
				t.Fatalf("send %d with the poller running: %v (%s)", i, err, b.u.Accounting())
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.Drain(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 100)
		for i := 0; i < 16; i++ {
			if _, err := rx.Read(buf); err != nil {
				t.Fatalf("datagram %d from the Sender: %v", i, err)
			}
		}

		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// Reverse order of creation; b.close then closes the program,
		// the sockets (the Poller's frames come back here) and checks
		// that every frame is free before closing the UMEM.
		if !senderLast {
			if err := s.Close(); err != nil {
				t.Fatalf("Sender Close: %v", err)
			}
		}
		if err := b.poller.Close(); err != nil {
			t.Fatalf("Poller Close: %v", err)
		}
		if a := b.u.Accounting(); a.Fill == 0 {
			t.Fatalf("nothing on the Fill ring before the socket closed: %s", a)
		}
		for _, sk := range b.socks {
			if err := sk.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if senderLast {
			if err := s.Close(); err != nil {
				t.Fatalf("Sender Close after the socket's: %v", err)
			}
		}
		if a := b.u.Accounting(); a.Free != a.Total {
			t.Fatalf("after closing in natural order: %s", a)
		}
		if n, err := b.poller.Reclaim(); n != 0 || err != nil {
			t.Fatalf("Reclaim after Close: %d, %v", n, err)
		}
		b.close(t)
	}
}

// TestFramesAllOnFill: when every frame is on a Fill ring, a send says
// so, still matching txpath.ErrNoFrames.
func TestFramesAllOnFill(t *testing.T) {
	b := newBed(t, bedConfig{frames: 2048, rx: rxpath.Config{FillFrames: 2048}})
	stop := b.run(rxpath.HandlerFunc(func(*rxpath.Packet) {}))
	defer stop()
	s, err := txpath.New(b.socks[0], &txpath.Config{Policy: txpath.Software, Device: &txpath.Device{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	flow, err := txpath.NewUDPFlow(b.pair.A.MAC, b.pair.B.MAC, b.pair.A.AddrPort4(port), b.pair.B.AddrPort4(port), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.SendUDP(flow, txpath.Options{}, []byte("x"))
	if !errors.Is(err, txpath.ErrNoFrames) || err == txpath.ErrNoFrames {
		t.Fatalf("SendUDP with every frame on the Fill ring: %v, want ErrNoFrames saying why", err)
	}
	t.Log(err)
}
