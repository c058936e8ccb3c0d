package vethns_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestXSKSharedCloseOrder closes a socket and one NewShared made on its
// rings in both orders. The socket left open keeps the shared Fill and
// Completion rings: it lends frames and sends, and its completions come
// back. The first socket's descriptor and OnClose functions last until
// both are closed; then the kernel holds no frame, and every frame the
// test lent or sent is back in the allocator.
func TestXSKSharedCloseOrder(t *testing.T) {
	for _, firstFirst := range []bool{true, false} {
		name := "shared first"
		if firstFirst {
			name = "first socket first"
		}
		t.Run(name, func(t *testing.T) { testXSKSharedCloseOrder(t, firstFirst) })
	}
}

func testXSKSharedCloseOrder(t *testing.T, firstFirst bool) {
	vethns.Require(t)
	a := vethns.NewNS(t)
	p := vethns.NewPair(t, a, vethns.NewNS(t), nil)
	const frames = 64
	var u *umem.UMEM
	var first, shared *xsk.Socket
	err := a.Do(func() error {
		var err error
		if u, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: frames}); err != nil {
			return err
		}
		rings := &xsk.Config{Mode: xsk.ModeCopy, RXSize: 64, TXSize: 64, FillSize: 64, CompletionSize: 64}
		if first, err = xsk.New(p.A.Name, 0, u, rings); err != nil {
			return err
		}
		shared, err = xsk.NewShared(first, rings)
		return err
	})
	t.Cleanup(func() { // on failure; after the test's own Close these do nothing
		if shared != nil {
			shared.Close()
		}
		if first != nil {
			first.Close()
		}
		if u != nil {
			u.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	firstFD := first.FD()
	var firstDone bool
	first.OnClose(func() { firstDone = true })

	var lent []uint64 // frames on the Fill ring
	lend := func(who string, s *xsk.Socket, n int) {
		t.Helper()
		addrs := make([]uint64, n)
		if got := u.GetBatch(addrs); got != n {
			t.Fatalf("got %d free frames, want %d", got, n)
		}
		if k := s.Fill().Produce(addrs); k != n {
			t.Fatalf("%s: the Fill ring took %d of %d frames", who, k, n)
		}
		lent = append(lent, addrs...)
	}
	lend("first socket", first, 8)

	closing, staying, stayName := first, shared, "shared socket"
	if !firstFirst {
		closing, staying, stayName = shared, first, "first socket"
	}
	if err := closing.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if firstFirst {
		if firstDone {
			t.Error("the first socket's OnClose ran while the shared socket used its rings")
		}
		if _, err := unix.FcntlInt(uintptr(firstFD), unix.F_GETFD, 0); err != nil {
			t.Errorf("the first socket's descriptor closed while the shared socket used its rings: %v", err)
		}
		if err := first.WakeRX(); err == nil {
			t.Error("WakeRX on the closed first socket succeeded")
		}
	}
	lend(stayName, staying, 8)
	sendAndReap(t, staying, u, p, 8)
	if err := staying.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !firstDone {
		t.Error("the first socket's OnClose did not run after both sockets closed")
	}

	// Both sockets are closed: the kernel holds no frame, and those on
	// the Fill ring are the test's again.
	u.Moved(umem.Fill, umem.Held, len(lent))
	if err := u.PutBatch(lent); err != nil {
		t.Fatal(err)
	}
	if acc := u.Accounting(); acc.Free != frames || acc.Held != 0 || acc.Fill != 0 || acc.TX != 0 {
		t.Fatalf("frames after both Close: %v, want all %d free", acc, frames)
	}
	if err := u.Close(); err != nil {
		t.Fatalf("UMEM Close after both sockets: %v", err)
	}
}

// sendAndReap sends n UDP frames from A to B (port 9, discard) on s's TX ring and waits
// for their completions on s's Completion ring, then frees them.
func sendAndReap(t *testing.T, s *xsk.Socket, u *umem.UMEM, p *vethns.Pair, n int) {
	t.Helper()
	descs := make([]xsk.Desc, n)
	for i := range descs {
		addr, ok := u.Get()
		if !ok {
			t.Fatal("no free frame to send")
		}
		pl := []byte{byte(i)}
		l := udpFrame(u.Frame(addr), p.A.MAC, p.B.MAC, p.A.AddrPort4(9), p.B.AddrPort4(9), pl)
		descs[i] = xsk.Desc{Addr: addr, Len: uint32(l)}
	}
	if k := s.TX().Produce(descs); k != n {
		t.Fatalf("the TX ring took %d of %d frames", k, n)
	}
	done := make([]uint64, 0, n)
	buf := make([]uint64, n)
	deadline := time.Now().Add(10 * time.Second)
	for len(done) < n {
		if err := s.KickTX(); err != nil {
			t.Fatalf("KickTX: %v", err)
		}
		k := s.Completion().Consume(buf)
		done = append(done, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after 10 s", len(done), n)
			}
			time.Sleep(time.Millisecond) // poll until the deadline
		}
	}
	if err := u.PutBatch(done); err != nil {
		t.Fatal(err)
	}
}
