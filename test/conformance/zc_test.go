package conformance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// zcFeature is the kernel table's name for what ZC mode needs.
const zcFeature = "AF_XDP zero-copy on virtio_net"

// notApplicable is an error of setup that says a kernel feature the case
// needs is missing, as the library's probe found (run ends the test as
// not applicable).
type notApplicable struct {
	feature string
	err     error
}

func (e *notApplicable) Error() string { return e.feature + ": " + e.err.Error() }
func (e *notApplicable) Unwrap() error { return e.err }

// zcCaps is what the NIC pair's driver does in zero-copy mode, as the
// library finds it: ok when a ModeZeroCopy socket binds (why says why
// not), maxSegs the buffers per packet it takes (xdp_zc_max_segs).
type zcCaps struct {
	ok      bool
	why     error
	driver  string
	maxSegs uint32
}

var zcProbe struct {
	once sync.Once
	caps zcCaps
}

// probeZC binds a ModeZeroCopy socket on a NIC pair once per process
// and gives the pair back at once. The library must either bind in
// zero-copy mode or refuse with ErrNotSupported, and bind where the
// device advertises zero-copy; anything else fails t.
func probeZC(t *testing.T) *zcCaps {
	t.Helper()
	zcProbe.once.Do(func() {
		a, b := vethns.NewNS(t), vethns.NewNS(t)
		p := vethns.NewNICPair(t, a, b, nil)
		defer func() {
			if err := errors.Join(p.Close(), a.Close(), b.Close()); err != nil {
				t.Errorf("give the NIC pair back: %v", err)
			}
		}()
		z := &zcProbe.caps
		err := a.Do(func() error {
			info, err := xsk.Device(p.A.Name)
			if err != nil {
				return err
			}
			z.driver, z.maxSegs = info.Driver, info.XDPZeroCopyMaxSegs
			u, err := umem.New(nil)
			if err != nil {
				return err
			}
			defer u.Close()
			s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{Mode: xsk.ModeZeroCopy, NoRX: true})
			switch {
			case err == nil:
				z.ok = s.ZeroCopy()
				if err := s.Close(); err != nil {
					return err
				}
				if !z.ok {
					return errors.New("ModeZeroCopy bound, but the socket is not in zero-copy mode")
				}
			case !errors.Is(err, xsk.ErrNotSupported):
				return fmt.Errorf("ModeZeroCopy: %w (want success or ErrNotSupported)", err)
			case info.XDPFeatures&xsk.XDPXSKZeroCopy != 0:
				return fmt.Errorf("%s advertises zero-copy, but: %w", p.A.Name, err)
			default:
				z.why = fmt.Errorf("%s (driver %s): %w", p.A.Name, info.Driver, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("zero-copy probe: %v", err)
		}
		t.Logf("ZC: driver %s, zero-copy %v, zero-copy max segments %d", z.driver, z.ok, z.maxSegs)
	})
	return &zcProbe.caps
}

// TestZeroCopyMode: where NIC pairs exist, the probe runs (and every
// case has a ZC subtest); where none does, no case has one, and zero-copy
// on veth must be refused as the library promises.
func TestZeroCopyMode(t *testing.T) {
	vethns.Require(t)
	if vethns.NICPairs() > 0 {
		probeZC(t)
		return
	}
	t.Logf("no NIC pair (%s): the cases run in SKB and DRV mode only; make kernels runs ZC on virtio_net in QEMU", vethns.NICPairsEnv)
	ns := vethns.NewNS(t)
	p := vethns.NewPair(t, ns, ns, nil)
	err := ns.Do(func() error {
		u, err := umem.New(nil)
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{Mode: xsk.ModeZeroCopy})
		if err == nil {
			return errors.Join(errors.New("veth bound in zero-copy mode"), s.Close())
		}
		if !errors.Is(err, xsk.ErrNotSupported) {
			return fmt.Errorf("ModeZeroCopy on veth: %w (want ErrNotSupported)", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rxNoHandler reads the interface's rx_nohandler counter (IFLA_STATS64):
// frames the kernel stack got and had no protocol for, such as the
// cases' (EtherType 0x9000) when a driver passes one to the stack
// instead of running the XDP program on it. Run it in the interface's
// namespace.
func rxNoHandler(ifindex int) (uint64, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if len(m) < unix.SizeofIfInfomsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofIfInfomsg:])
		if err != nil {
			return 0, err
		}
		for _, a := range attrs {
			// struct rtnl_link_stats64: rx_nohandler is the 24th u64.
			if a.Attr.Type == unix.IFLA_STATS64 && len(a.Value) >= 24*8 {
				return binary.NativeEndian.Uint64(a.Value[23*8:]), nil
			}
		}
	}
	return 0, errors.New("no IFLA_STATS64 with rx_nohandler")
}
