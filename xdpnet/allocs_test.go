package xdpnet_test

import (
	"testing"
	"time"
)

// TestAllocs: ReadFrom allocates its address once per datagram;
// ReadFromUDPAddrPort and WriteToUDPAddrPort allocate nothing.
func TestAllocs(t *testing.T) {
	bd := newBed(t, false, nil)
	cl, err := bd.b.ListenUDP(bd.p.B.AddrPort4(7000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const runs = 200
	msg := []byte("a datagram")
	// 2*(runs+1) datagrams wait to be read: AllocsPerRun runs once more
	// than asked.
	want := uint64(2 * (runs + 1))
	for sent := uint64(0); bd.c.Stats().Received < want; {
		if sent >= 10*want {
			t.Fatalf("%d sent, %+v", sent, bd.c.Stats())
		}
		for range want - bd.c.Stats().Received {
			if _, err := cl.WriteToUDPAddrPort(msg, bd.srv); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		for w := time.Now().Add(time.Second); bd.c.Stats().Received < want && time.Now().Before(w); {
			time.Sleep(time.Millisecond)
		}
	}
	buf := make([]byte, 100)
	if a := testing.AllocsPerRun(runs, func() {
		if _, _, err := bd.c.ReadFrom(buf); err != nil {
			t.Fatal(err)
		}
	}); a > 1 {
		t.Errorf("ReadFrom: %v allocations, want 1", a)
	}
	if a := testing.AllocsPerRun(runs, func() {
		if _, _, err := bd.c.ReadFromUDPAddrPort(buf); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("ReadFromUDPAddrPort: %v allocations, want 0", a)
	}
	dst := bd.p.B.AddrPort4(7000)
	if _, err := bd.c.WriteToUDPAddrPort(msg, dst); err != nil { // the route is cached
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(runs, func() {
		if _, err := bd.c.WriteToUDPAddrPort(msg, dst); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("WriteToUDPAddrPort: %v allocations, want 0", a)
	}
}
