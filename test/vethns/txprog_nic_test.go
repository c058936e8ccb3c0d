package vethns_test

import (
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestTXProgramOnNIC forces the TX program rule on (as the driver table
// has it for i40e, ice, ixgbe and mlx5_core) for a TX-only socket on a
// NIC pair (virtio_net in make kernels' guests; zero-copy where the probe
// finds it) or, without one, on veth: the pass program is attached
// natively, datagrams leave through the socket and arrive, and the
// program is gone once the socket closes.
func TestTXProgramOnNIC(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	var p *vethns.Pair
	zc := false
	if vethns.NICPairs() > 0 {
		p = vethns.NewNICPair(t, a, b, nil)
		zc = nicZeroCopy(t, a, p.A.Name)
	} else {
		t.Logf("no NIC pair in %s: on veth (copy mode)", vethns.NICPairsEnv)
		p = vethns.NewPair(t, a, b, nil)
	}
	conn, err := b.ListenUDP(p.B.AddrPort4(9002))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	xdpMode := func() uint32 {
		var m uint32
		if err := a.Do(func() error {
			l, err := netlink.LinkByName(p.A.Name)
			if err == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached {
				m = l.Attrs().Xdp.AttachMode
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	const n = 32 // below the 64 datagrams a NIC pair keeps in flight
	got := 0
	err = a.Do(func() error {
		u, err := umem.New(&umem.Config{FrameCount: 1024})
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{NoRX: true})
		if err != nil {
			return err
		}
		defer s.Close()
		if s.ZeroCopy() != zc {
			t.Errorf("socket zero-copy %v, the probe said %v", s.ZeroCopy(), zc)
		}
		if ok, err := s.AttachTXProgram(xsk.TXProgramAlways); !ok || err != nil {
			t.Fatalf("AttachTXProgram(always) on %s: %v, %v", p.A.Name, ok, err)
		}
		l, err := netlink.LinkByName(p.A.Name)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x == nil || !x.Attached || x.AttachMode != 1 {
			t.Errorf("after AttachTXProgram: XDP %+v, want a native program", x)
		}
		snd, err := txpath.New(s, nil)
		if err != nil {
			return err
		}
		defer snd.Close()
		fl, err := txpath.NewUDPFlow(p.A.MAC, p.B.MAC, p.A.AddrPort4(9001), p.B.AddrPort4(9002), nil)
		if err != nil {
			return err
		}
		for range n {
			if err := snd.SendUDP(fl, txpath.Options{}, []byte("tx program")); err != nil {
				return err
			}
		}
		if err := snd.Flush(); err != nil {
			return err
		}
		// Receive while the socket (and its program) is there.
		buf := make([]byte, 2048)
		for got < n {
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := conn.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					break
				}
				return err
			}
			got++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if m := xdpMode(); m != 0 {
		t.Errorf("XDP attach mode %d after the socket closed, want none", m)
	}
	if got == 0 {
		t.Errorf("none of %d datagrams sent with the TX program attached arrived (zero-copy %v)", n, zc)
	}
	t.Logf("%d of %d datagrams arrived, zero-copy %v", got, n, zc)
}
