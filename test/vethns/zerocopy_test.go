package vethns_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestZeroCopyRefusedOnVeth: veth has no zero-copy mode. ModeZeroCopy
// fails with ErrNotSupported and a FeatureError that names the reason;
// ModeAuto binds in copy mode.
func TestZeroCopyRefusedOnVeth(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	err := a.Do(func() error {
		u, err := umem.New(nil)
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{Mode: xsk.ModeZeroCopy})
		if err == nil {
			return errors.Join(errors.New("veth bound in zero-copy mode"), s.Close())
		}
		var fe *xsk.FeatureError
		if !errors.Is(err, xsk.ErrNotSupported) || !errors.As(err, &fe) || !strings.Contains(fe.Reason, "copy mode") {
			return fmt.Errorf("ModeZeroCopy on veth: %v (want ErrNotSupported, a FeatureError that says what copy mode costs)", err)
		}
		t.Logf("ModeZeroCopy: %v", err)
		s, err = xsk.New(p.A.Name, 0, u, &xsk.Config{NoRX: true})
		if err != nil {
			return err
		}
		defer s.Close()
		if s.ZeroCopy() || s.Stocked() != 0 {
			return fmt.Errorf("ModeAuto on veth: zero-copy %v, %d frames stocked", s.ZeroCopy(), s.Stocked())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// nicZeroCopy reports whether the library binds the NIC pair's A end in
// zero-copy mode. The library's own probe decides: the device's XDP
// features and a ModeZeroCopy bind, which either succeeds or fails with
// ErrNotSupported and the reason; a device that advertises zero-copy must
// bind.
func nicZeroCopy(t *testing.T, ns *vethns.NS, ifname string) bool {
	t.Helper()
	var zc bool
	err := ns.Do(func() error {
		info, err := xsk.Device(ifname)
		if err != nil {
			return err
		}
		advertised := info.XDPFeatures&xsk.XDPXSKZeroCopy != 0
		u, err := umem.New(nil)
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(ifname, 0, u, &xsk.Config{Mode: xsk.ModeZeroCopy})
		if err == nil {
			zc = s.ZeroCopy()
			if err := s.Close(); err != nil {
				return err
			}
			if !zc {
				return errors.New("ModeZeroCopy bound, but the socket is not in zero-copy mode")
			}
		} else if !errors.Is(err, xsk.ErrNotSupported) {
			return fmt.Errorf("ModeZeroCopy: %w (want success or ErrNotSupported)", err)
		} else if advertised {
			return fmt.Errorf("the device advertises zero-copy, but: %w", err)
		}
		t.Logf("%s: driver %s, features from %s: xdp %s, zero-copy max segments %d; ModeZeroCopy: %v",
			ifname, info.Driver, info.FeaturesFrom, info.XDPFeatures, info.XDPZeroCopyMaxSegs, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return zc
}

// TestZeroCopy runs the receive, transmit, echo, shared-UMEM and
// multi-buffer paths on a pair of real NICs (virtio_net in make kernels'
// QEMU guests) in the mode the library's probe finds: zero-copy where the
// driver and kernel have it (Socket.ZeroCopy checked), copy mode where
// they do not. Without a NIC pair (NICPairsEnv) it checks what the library
// promises on veth instead.
func TestZeroCopy(t *testing.T) {
	vethns.Require(t)
	if vethns.NICPairs() == 0 {
		t.Logf("no NIC pair in %s: zero-copy needs a driver that has it; make kernels runs this on virtio_net in QEMU", vethns.NICPairsEnv)
		TestZeroCopyRefusedOnVeth(t)
		return
	}
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewNICPair(t, a, b, nil)
	zc := nicZeroCopy(t, a, p.A.Name)

	t.Run("rx", func(t *testing.T) {
		rx := newRX(t, a, p.A.Name, 1, &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}})
		if got := rx.socks[0].ZeroCopy(); got != zc {
			t.Fatalf("ModeAuto bound with zero-copy %v, the probe said %v", got, zc)
		}
		runRX(t, b, p, rx, 20000)
	})
	for _, family := range []string{"ipv4", "ipv6"} {
		t.Run("tx-"+family, func(t *testing.T) { runTX(t, a, b, p, family, zc) })
	}
	t.Run("tx-only-keeps-receive", func(t *testing.T) {
		// A socket without RX ring is bound on the queue: the kernel
		// must still receive on it (in zero-copy mode the driver takes
		// its receive buffers from that socket's Fill ring).
		err := a.Do(func() error {
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
				return fmt.Errorf("zero-copy %v, the probe said %v", s.ZeroCopy(), zc)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, dst := range []netip.Addr{p.A.IPv4.Addr(), p.A.IPv6.Addr()} {
				if err := b.Ping(ctx, dst, 5, 5*time.Second); err != nil {
					return fmt.Errorf("ping %s while a socket without RX ring is bound (zero-copy %v, %d frames stocked): %w", dst, s.ZeroCopy(), s.Stocked(), err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("echo", func(t *testing.T) { runEcho(t, a, b, p, zc) })
	t.Run("multi-buffer", func(t *testing.T) {
		var noSG error // copy mode refused XDP_USE_SG: the kernel lacks it
		err := a.Do(func() error {
			info, err := xsk.Device(p.A.Name)
			if err != nil {
				return err
			}
			u, err := umem.New(nil)
			if err != nil {
				return err
			}
			defer u.Close()
			mode := xsk.ModeCopy
			if zc {
				mode = xsk.ModeZeroCopy
			}
			s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{Mode: mode, MultiBuffer: true})
			var fe *xsk.FeatureError
			switch {
			case err == nil:
				defer s.Close()
				if !s.Features().MultiBuffer {
					return errors.New("multi-buffer bound, but Features says no")
				}
				if zc && info.XDPZeroCopyMaxSegs <= 1 {
					return fmt.Errorf("multi-buffer bound in zero-copy with zero-copy max segments %d", info.XDPZeroCopyMaxSegs)
				}
				t.Logf("multi-buffer in %v mode", mode)
			case zc && info.XDPZeroCopyMaxSegs <= 1 && errors.As(err, &fe) && strings.Contains(fe.Reason, "zero-copy max segments"):
				// One buffer per packet in zero-copy: the library says so.
				t.Logf("multi-buffer in zero-copy mode refused as the library promises: %v", err)
			case !zc && errors.Is(err, xsk.ErrNotSupported) && strings.Contains(err.Error(), "XDP_USE_SG"):
				noSG = err
			default:
				return fmt.Errorf("multi-buffer in %v mode (zero-copy max segments %d): %w", mode, info.XDPZeroCopyMaxSegs, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if noSG != nil {
			vethns.NotApplicable(t, "AF_XDP multi-buffer", noSG.Error())
		}
	})
	t.Run("shared-umem", func(t *testing.T) {
		if vethns.NICPairs() < 2 {
			t.Fatalf("%s names %d NIC pair(s); the shared-UMEM case needs two", vethns.NICPairsEnv, vethns.NICPairs())
		}
		b2 := vethns.NewNS(t)
		p2 := vethns.NewNICPair(t, a, b2, nil)
		runSharedNICs(t, a, []*vethns.NS{b, b2}, []*vethns.Pair{p, p2}, zc)
	})
}

// runEcho answers UDP datagrams on p.A with rxpath and txpath on one socket
// (RX and TX, ModeAuto) and checks from p.B that 2,000 replies of 1 to
// 1,400 bytes come back byte-exact, with checksums the client's kernel
// accepts.
func runEcho(t *testing.T, a, b *vethns.NS, p *vethns.Pair, zc bool) {
	const port = 9000
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- a.Do(func() error {
			u, err := umem.New(&umem.Config{FrameCount: 4096})
			if err != nil {
				ready <- err
				return err
			}
			defer u.Close()
			sock, err := xsk.New(p.A.Name, 0, u, nil)
			if err != nil {
				ready <- err
				return err
			}
			defer sock.Close()
			prog, err := xsk.AttachProgram(p.A.Name, &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, IPv6UDP: true, DstPorts: []uint16{port}}})
			if err != nil {
				ready <- err
				return err
			}
			defer prog.Close()
			if err := prog.Register(sock); err != nil {
				ready <- err
				return err
			}
			s, err := txpath.New(sock, &txpath.Config{Policy: txpath.Plain})
			if err != nil {
				ready <- err
				return err
			}
			defer s.Close()
			poller, err := rxpath.New(nil, sock)
			if err != nil {
				ready <- err
				return err
			}
			defer poller.Close()
			if sock.ZeroCopy() != zc {
				err := fmt.Errorf("echo socket: zero-copy %v, the probe said %v", sock.ZeroCopy(), zc)
				ready <- err
				return err
			}
			ready <- nil
			var f pkt.Frame
			err = poller.Run(ctx, rxpath.HandlerFunc(func(rp *rxpath.Packet) {
				if pkt.Parse(rp.Data, &f) != nil || f.Proto != pkt.ProtoUDP || f.DstPort != port {
					return
				}
				if n, err := pkt.ReplyUDP(rp.Data, &f); err == nil && s.SendFrame(txpath.Options{}, rp.Data[:n]) == nil {
					_ = s.Flush()
				}
			}))
			if errors.Is(err, context.Canceled) {
				err = nil
			}
			return err
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("echo server: %v", err)
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	before, err := b.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, dst := range []netip.AddrPort{p.A.AddrPort4(port), p.A.AddrPort6(port)} {
		c, err := b.DialUDP(netip.AddrPort{}, dst)
		if err != nil {
			t.Fatal(err)
		}
		vethns.WaitEcho(t, c)
		vethns.RoundTrips(t, c, 1000)
		c.Close()
	}
	after, err := b.Counters()
	if err != nil {
		t.Fatal(err)
	}
	vethns.SameCounters(t, "client", before, after, vethns.ChecksumCounters)
}

// runSharedNICs: one UMEM, a socket on the A end of each pair (the second
// shares the first's UMEM with its own Fill and Completion rings), each
// receiving 5,000 datagrams from a kernel sender on its pair's B end.
func runSharedNICs(t *testing.T, a *vethns.NS, bs []*vethns.NS, ps []*vethns.Pair, zc bool) {
	rx := &rxSetup{}
	t.Cleanup(func() { rx.close(t) })
	err := a.Do(func() error {
		var err error
		rx.u, err = umem.New(&umem.Config{FrameCount: uint32(4096 * len(ps))})
		if err != nil {
			return err
		}
		for _, p := range ps {
			s, err := xsk.New(p.A.Name, 0, rx.u, &xsk.Config{NoTX: true})
			if err != nil {
				return err
			}
			rx.socks = append(rx.socks, s)
			if s.ZeroCopy() != zc {
				return fmt.Errorf("%s: zero-copy %v, the probe said %v", p.A.Name, s.ZeroCopy(), zc)
			}
			addrs := make([]uint64, 2048)
			n := rx.u.GetBatch(addrs)
			if got := s.Fill().Produce(addrs[:n]); got != n {
				return fmt.Errorf("fill ring took %d of %d", got, n)
			}
			prog, err := xsk.AttachProgram(p.A.Name, &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}}})
			if err != nil {
				return err
			}
			t.Cleanup(func() { prog.Close() })
			if err := prog.Register(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		one := &rxSetup{u: rx.u, socks: []*xsk.Socket{rx.socks[i]}}
		runRX(t, bs[i], p, one, 5000)
	}
}

// TestZeroCopyWithoutDMA: on a virtio-net NIC without
// VIRTIO_F_ACCESS_PLATFORM (QEMU's iommu_platform=on), virtio_net cannot
// map a UMEM for DMA and the kernel refuses a zero-copy bind with EINVAL:
// the library says why (ErrNotSupported, a FeatureError naming the
// device's missing feature), and ModeAuto binds in copy mode. make kernels'
// guests have such a NIC (XDPKIT_NIC_NOIOMMU); with none, veth's refusal
// is checked instead. The NIC is not in a namespace of the test: nothing
// is sent, and no address is set.
func TestZeroCopyWithoutDMA(t *testing.T) {
	vethns.Require(t)
	nic := os.Getenv("XDPKIT_NIC_NOIOMMU")
	if nic == "" {
		t.Log("no XDPKIT_NIC_NOIOMMU: the veth refusal instead")
		TestZeroCopyRefusedOnVeth(t)
		return
	}
	info, err := xsk.Device(nic)
	if err != nil {
		t.Fatal(err)
	}
	u, err := umem.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	s, err := xsk.New(nic, 0, u, &xsk.Config{Mode: xsk.ModeZeroCopy, NoTX: true})
	if err == nil {
		t.Fatalf("%s (%s) bound in zero-copy mode without VIRTIO_F_ACCESS_PLATFORM (Close: %v)", nic, info, s.Close())
	}
	var fe *xsk.FeatureError
	if !errors.Is(err, xsk.ErrNotSupported) || !errors.As(err, &fe) {
		t.Fatalf("ModeZeroCopy: %v; want ErrNotSupported with a FeatureError", err)
	}
	advertised := info.XDPFeatures&xsk.XDPXSKZeroCopy != 0
	if advertised && !strings.Contains(fe.Reason, "VIRTIO_F_ACCESS_PLATFORM") {
		t.Errorf("the driver advertises zero-copy; the reason should name the DMA API it lacks: %v", err)
	}
	t.Logf("%s, xdp-features %s: %v", nic, info.XDPFeatures, err)
	s, err = xsk.New(nic, 0, u, &xsk.Config{NoTX: true})
	if err != nil {
		t.Fatalf("ModeAuto: %v", err)
	}
	defer s.Close()
	if s.ZeroCopy() {
		t.Fatal("ModeAuto bound in zero-copy mode without VIRTIO_F_ACCESS_PLATFORM")
	}
}
