package xsk

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
)

// TestTXProgramTable checks the rule's decision through the driver table.
func TestTXProgramTable(t *testing.T) {
	need := map[string]bool{"i40e": true, "ixgbe": true, "ice": true, "mlx5_core": true}
	for _, d := range append(Drivers(), DriverNotes{Driver: "unknown"}) {
		if d.Driver != "unknown" && d.Source == "" {
			t.Errorf("%s: no kernel source cited", d.Driver)
		}
		for _, zc := range []bool{false, true} {
			if got, want := txProgramNeeded(TXProgramAuto, d.Driver, zc), need[d.Driver] && zc; got != want {
				t.Errorf("auto, %s, zero-copy %v: %v, want %v", d.Driver, zc, got, want)
			}
			if !txProgramNeeded(TXProgramAlways, d.Driver, zc) || txProgramNeeded(TXProgramNever, d.Driver, zc) {
				t.Errorf("always/never on %s ignore the driver", d.Driver)
			}
		}
	}
	for _, tc := range []struct {
		info DeviceInfo
		want int
	}{
		{DeviceInfo{Driver: "veth", MTU: 1500}, 2048},
		{DeviceInfo{Driver: "ena", MTU: 1500}, 4096},
		{DeviceInfo{Driver: "i40e", MTU: 1774}, 2048},
		{DeviceInfo{Driver: "i40e", MTU: 1775}, 4096},
		{DeviceInfo{Driver: "virtio_net", MTU: 9000}, 4096},
	} {
		if got := FrameSizeFor(tc.info); got != tc.want {
			t.Errorf("FrameSizeFor(%s, mtu %d) = %d, want %d", tc.info.Driver, tc.info.MTU, got, tc.want)
		}
	}
}

// TestTXProgramAttachRelease forces the rule on veth: two TX-only
// sockets share one pass program, natively attached, which goes when the
// second closes; the auto rule attaches none on veth.
func TestTXProgramAttachRelease(t *testing.T) {
	vethns.Require(t)
	ns := vethns.NewNS(t)
	p := vethns.NewPair(t, ns, vethns.NewNS(t), &vethns.PairConfig{Queues: 2})
	attached := func() uint32 {
		l, err := netlink.LinkByName(p.A.Name)
		if err != nil {
			t.Fatal(err)
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			return x.AttachMode
		}
		return 0
	}
	err := ns.Do(func() error {
		var socks [2]*Socket
		for q := range socks {
			u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 256})
			if err != nil {
				return err
			}
			defer u.Close()
			if socks[q], err = New(p.A.Name, q, u, &Config{NoRX: true}); err != nil {
				return err
			}
			defer socks[q].Close()
		}
		if ok, err := socks[0].AttachTXProgram(TXProgramAuto); ok || err != nil {
			t.Errorf("auto on veth (copy mode): attached %v, %v; want none", ok, err)
		}
		if attached() != 0 || TXProgramAttached(p.A.Name) {
			t.Fatal("auto on veth attached a program")
		}
		for _, s := range socks {
			if ok, err := s.AttachTXProgram(TXProgramAlways); !ok || err != nil {
				t.Fatalf("always: attached %v, %v", ok, err)
			}
		}
		if m := attached(); m != xdpAttachedDrv || !TXProgramAttached(p.A.Name) {
			t.Fatalf("after AttachTXProgram: XDP attach mode %d, want native", m)
		}
		socks[0].Close()
		if attached() != xdpAttachedDrv {
			t.Error("the program went with the first of two sockets")
		}
		socks[1].Close()
		if attached() != 0 || TXProgramAttached(p.A.Name) {
			t.Error("the program stayed after the last socket closed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

const xdpAttachedDrv = 1 // IFLA_XDP_ATTACHED value for a native program
