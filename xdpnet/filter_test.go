package xdpnet_test

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// deliveredTo sends msg with send (at most 50 times, 100 ms apart) until
// the kernel socket rc receives it, and fails t if it never does.
func deliveredTo(t *testing.T, rc *net.UDPConn, msg []byte, send func() error) {
	t.Helper()
	buf := make([]byte, 256)
	for range 50 {
		if err := send(); err != nil {
			t.Fatalf("send: %v", err)
		}
		rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, _, err := rc.ReadFromUDPAddrPort(buf); err == nil && bytes.Equal(buf[:n], msg) {
			return
		}
	}
	t.Fatalf("the kernel socket on %v got nothing in 5 s", rc.LocalAddr())
}

// TestOtherDestinations: datagrams to the bound port but to another
// destination than the bound address stay with the kernel: the subnet's
// broadcast address, and an address added to the interface after
// ListenUDP. The conn never sees them.
func TestOtherDestinations(t *testing.T) {
	t.Run("broadcast", func(t *testing.T) {
		bd := newBed(t, false, nil)
		p := bd.p.A.IPv4.Masked()
		b4 := p.Addr().As4()
		b4[3] |= 3 // the /30's broadcast address
		bcast := netip.AddrPortFrom(netip.AddrFrom4(b4), port)
		rc, err := bd.a.ListenUDP(bcast)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		sc, err := bd.b.ListenUDP(bd.p.B.AddrPort4(0))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		raw, err := sc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
		}); err != nil || serr != nil {
			t.Fatalf("SO_BROADCAST: %v %v", err, serr)
		}
		msg := []byte("to all")
		deliveredTo(t, rc, msg, func() error {
			_, err := sc.WriteToUDPAddrPort(msg, bcast)
			return err
		})
		if s := bd.c.Stats(); s.NotOurs != 0 || s.Received != 0 {
			t.Errorf("the conn saw the broadcast datagrams: %+v", s)
		}
	})
	t.Run("address added later", func(t *testing.T) {
		bd := newBed(t, true, nil)
		a16 := bd.p.A.IPv6.Addr().As16()
		a16[15] += 4
		other := netip.AddrPortFrom(netip.AddrFrom16(a16), port)
		err := bd.a.Do(func() error {
			l, err := netlink.LinkByIndex(bd.p.A.Index)
			if err != nil {
				return err
			}
			return netlink.AddrAdd(l, &netlink.Addr{
				IPNet: &net.IPNet{IP: other.Addr().AsSlice(), Mask: net.CIDRMask(128, 128)},
				Flags: unix.IFA_F_NODAD,
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := bd.a.ListenUDP(other)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		sc, err := bd.b.DialUDP(netip.AddrPort{}, other)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		msg := []byte("to the new address")
		deliveredTo(t, rc, msg, func() error {
			_, err := sc.Write(msg)
			if errors.Is(err, syscall.ECONNREFUSED) {
				return nil // an ICMP error of an earlier try
			}
			return err
		})
		if s := bd.c.Stats(); s.NotOurs != 0 || s.Received != 0 {
			t.Errorf("the conn saw the datagrams to another address: %+v", s)
		}
	})
}
