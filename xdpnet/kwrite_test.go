package xdpnet_test

import (
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestKernelWriteDeadline: a write blocked in the kernel socket (its
// send buffer full of datagrams that wait for a neighbour that never
// answers) fails with a timeout when the write deadline is moved to the
// past while it is blocked.
func TestKernelWriteDeadline(t *testing.T) {
	bd := newBed(t, false, &vethns.PairConfig{NoNeigh: true})
	err := bd.b.Do(func() error {
		l, err := netlink.LinkByName(bd.p.B.Name)
		if err != nil {
			return err
		}
		return netlink.LinkSetARPOff(l) // the client answers no ARP request
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bd.c.SetKernelWriteBuffer(1); err != nil { // the kernel raises it to its minimum
		t.Fatal(err)
	}
	dst := bd.p.B.AddrPort4(7000)
	msg := make([]byte, 1400)
	results := make(chan error)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for range 100 {
			_, err := bd.c.WriteToUDPAddrPort(msg, dst)
			select {
			case results <- err:
			case <-stop:
				return
			}
		}
	}()
	// Writes return until the send buffer is full; the next one blocks
	// until the kernel gives up on the neighbour (seconds).
	for n := 0; ; n++ {
		select {
		case err := <-results:
			if err != nil {
				t.Fatalf("write %d: %v", n, err)
			}
			if n == 99 {
				t.Fatalf("100 writes, none blocked: %+v", bd.c.Stats())
			}
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	bd.c.SetWriteDeadline(time.Now().Add(-time.Second))
	select {
	case err := <-results:
		if !isTimeout(err) {
			t.Fatalf("blocked write after the deadline moved to the past: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blocked write did not return")
	}
}
