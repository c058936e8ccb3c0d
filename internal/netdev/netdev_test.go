package netdev

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestMain(m *testing.M) {
	vethns.Exclusive()
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

func TestFeatureStrings(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{XDPFeatures(0).String(), "none"},
		{(XDPBasic | XDPRedirect | XDPRxSG).String(), "basic redirect rx-sg"},
		{(XDPNdoXmit | XDPXSKZeroCopy | XDPHWOffload | XDPNdoXmitSG).String(), "ndo-xmit xsk-zerocopy hw-offload ndo-xmit-sg"},
		{XDPFeatures(1<<7 | 1).String(), "basic bit7"},
		{(XSKTxTimestamp | XSKTxChecksum | XSKTxLaunchTimeFIFO).String(), "tx-timestamp tx-checksum tx-launch-time-fifo"},
		{XSKFeatures(0).String(), "none"},
		{(RxMetadataTimestamp | RxMetadataHash | RxMetadataVLANTag).String(), "timestamp hash vlan-tag"},
		{XSKFeatures(1 << 63).String(), "bit63"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// attr encodes one netlink attribute, padded to 4 bytes, as the kernel
// lays it out.
func attr(typ uint16, val []byte) []byte {
	b, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: typ, Data: val}})
	if err != nil {
		panic(err)
	}
	return b
}

func u32(v uint32) []byte { b := make([]byte, 4); ne.PutUint32(b, v); return b }
func u64(v uint64) []byte { b := make([]byte, 8); ne.PutUint64(b, v); return b }

func TestParseDevGet(t *testing.T) {
	// As the kernel lays it out: ifindex, then PAD before each u64 when
	// needed for 8-byte alignment, zc-max-segs only with zero-copy.
	reply := cat(
		attr(netdevAttrDevIfindex, u32(7)),
		attr(netdevAttrDevPad, nil),
		attr(netdevAttrDevXDPFeatures, u64(uint64(XDPBasic|XDPRedirect|XDPXSKZeroCopy))),
		attr(netdevAttrDevXDPRxMetaFeatures|0x8000, u64(uint64(RxMetadataHash))), // NLA_F_NESTED masked off
		attr(netdevAttrDevXSKFeatures, u64(uint64(XSKTxChecksum))),
		attr(netdevAttrDevXDPZCMaxSegs, u32(5)),
		attr(99, []byte{1, 2, 3}), // unknown: skipped
	)
	f, err := parseDevGet(reply, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := devFeatures{xdp: XDPBasic | XDPRedirect | XDPXSKZeroCopy, rxMeta: RxMetadataHash, xsk: XSKTxChecksum, zcMaxSegs: 5}
	if f != want {
		t.Errorf("parsed %+v, want %+v", f, want)
	}
	if _, err := parseDevGet(reply, 8); err == nil {
		t.Error("reply for ifindex 7 accepted for ifindex 8")
	}
	if _, err := parseDevGet(attr(netdevAttrDevXDPFeatures, u64(1)), 7); err == nil {
		t.Error("reply without ifindex accepted")
	}
	if _, err := parseDevGet(cat(attr(netdevAttrDevIfindex, u32(7)), attr(netdevAttrDevXDPFeatures, u32(1))), 7); err == nil {
		t.Error("4-byte xdp-features accepted")
	}
	if _, err := parseDevGet(append(attr(netdevAttrDevIfindex, u32(7)), 0xff, 0x00, 0x03, 0x00), 7); err == nil {
		t.Error("attribute longer than the message accepted")
	}
}

// pairInfo returns Get's answer for both ends, asked inside their
// namespaces.
func getIn(t *testing.T, l *vethns.Link) Info {
	t.Helper()
	var info Info
	if err := l.NS.Do(func() error {
		var err error
		info, err = Get(l.Name)
		if err != nil {
			return err
		}
		byIndex, err := GetByIndex(l.Index)
		if err != nil {
			return err
		}
		if byIndex != info {
			t.Errorf("GetByIndex(%d) = %v\nGet(%q) = %v", l.Index, byIndex, l.Name, info)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return info
}

func TestGetVeth(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: 3, MTU: 2000})

	missing := "" // why the netdev family is missing, if it is
	for _, l := range []*vethns.Link{p.A, p.B} {
		info := getIn(t, l)
		t.Logf("%v", info)
		if info.Name != l.Name || info.Index != l.Index || info.Driver != "veth" || info.MTU != 2000 {
			t.Errorf("got %v, want %s ifindex %d driver veth mtu 2000", info, l.Name, l.Index)
		}
		if info.RxQueues != 3 || info.TxQueues != 3 || info.QueuesFrom != QueuesFromEthtool {
			t.Errorf("queues %d rx %d tx from %s, want 3 3 from ethtool", info.RxQueues, info.TxQueues, info.QueuesFrom)
		}
		if !info.TxCsumOffload {
			t.Error("veth TX checksum offload reads off; it is on by default")
		}
		if info.FeaturesFrom != FromNetdevGenl {
			// The fallback: features unknown (0), facts from ethtool.
			missing = checkFamilyMissing(t, info)
			compareEthtool(t, l, info)
			continue
		}
		// veth: basic, redirect and rx-sg; ndo-xmit only while the peer
		// has an XDP program (or GRO); no zero-copy, no XSK offloads.
		if want := XDPBasic | XDPRedirect | XDPRxSG; info.XDPFeatures != want {
			t.Errorf("XDP features [%v], want [%v]", info.XDPFeatures, want)
		}
		if info.XSKFeatures != 0 || info.XDPZeroCopyMaxSegs != 0 {
			t.Errorf("XSK features [%v], zc max segs %d; want none", info.XSKFeatures, info.XDPZeroCopyMaxSegs)
		}
		compareEthtool(t, l, info)
	}

	// The reply follows the device: with an XDP program on B, A can be a
	// redirect target (veth_set_xdp_features).
	if missing != "" {
		vethns.NotApplicable(t, "netdev genetlink family", missing)
	}
	xl := attachPass(t, p.B)
	got := getIn(t, p.A).XDPFeatures
	if want := XDPBasic | XDPRedirect | XDPRxSG | XDPNdoXmit | XDPNdoXmitSG; got != want {
		t.Errorf("with XDP on the peer: [%v], want [%v]", got, want)
	}
	if err := xl.Close(); err != nil {
		t.Fatal(err)
	}
	if got := getIn(t, p.A).XDPFeatures; got&XDPNdoXmit != 0 {
		t.Errorf("after detaching: [%v], want no ndo-xmit", got)
	}
}

// compareEthtool checks Info against what ethtool(8) would print, read the
// way ethtool reads it: tx-checksumming (-k) is on when any of the
// tx-checksum-* features is active (ETHTOOL_GFEATURES by name, where Info
// uses the legacy ETHTOOL_GTXCSUM); the driver (-i) from ETHTOOL_GDRVINFO;
// the channel counts (-l) from ETHTOOL_GCHANNELS.
func compareEthtool(t *testing.T, l *vethns.Link, info Info) {
	t.Helper()
	err := l.NS.Do(func() error {
		fd, err := ioctlSocket()
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		feats, err := featuresActive(fd, l.Name)
		if err != nil {
			return err
		}
		csum := false
		for _, f := range []string{"tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6"} {
			on, ok := feats[f]
			if !ok {
				return fmt.Errorf("no feature %q among %d", f, len(feats))
			}
			csum = csum || on
		}
		if csum != info.TxCsumOffload {
			t.Errorf("tx-checksum-* features say tx-checksumming %v, Info says %v", csum, info.TxCsumOffload)
		}
		drv, err := unix.IoctlGetEthtoolDrvinfo(fd, l.Name)
		if err != nil {
			return err
		}
		if d := unix.ByteSliceToString(drv.Driver[:]); d != info.Driver {
			t.Errorf("ETHTOOL_GDRVINFO driver %q, Info.Driver %q", d, info.Driver)
		}
		ch, err := ethtoolGetChannels(fd, l.Name)
		if err != nil {
			return err
		}
		if r, x := int(ch.rxCount+ch.combinedCount), int(ch.txCount+ch.combinedCount); r != info.RxQueues || x != info.TxQueues {
			t.Errorf("ETHTOOL_GCHANNELS says %d rx %d tx, Info %d %d", r, x, info.RxQueues, info.TxQueues)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRealQueues(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: 4})
	// Fewer queues in use than allocated: Info follows real_num_*.
	err := a.Do(func() error {
		_, err := SetQueues(p.A.Name, 2)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	info := getIn(t, p.A)
	if info.RxQueues != 2 || info.TxQueues != 2 {
		t.Errorf("after setting 2 rx 2 tx channels: %d rx %d tx queues", info.RxQueues, info.TxQueues)
	}
}

func TestSetTxCsumOffload(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	for _, on := range []bool{false, true, false} {
		if err := a.Do(func() error { return SetTxCsumOffload(p.A.Name, on) }); err != nil {
			t.Fatal(err)
		}
		info := getIn(t, p.A)
		if info.TxCsumOffload != on {
			t.Errorf("after SetTxCsumOffload(%v): Info says %v", on, info.TxCsumOffload)
		}
		compareEthtool(t, p.A, info)
		if peer := getIn(t, p.B); !peer.TxCsumOffload {
			t.Error("the peer's offload changed too")
		}
	}
	err := a.Do(func() error { return SetTxCsumOffload("xk-none", true) })
	if !errors.Is(err, ErrNoDevice) {
		t.Errorf("SetTxCsumOffload on a missing device: %v, want ErrNoDevice", err)
	}
}

func TestNoDevice(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)

	// The veth exists only in its namespace: asked from the test's own
	// namespace, it is unknown.
	_, err := Get(p.A.Name)
	var nf vnl.LinkNotFoundError
	if !errors.Is(err, ErrNoDevice) || !errors.As(err, &nf) {
		t.Errorf("Get(%q) outside its namespace: %v, want ErrNoDevice wrapping netlink.LinkNotFoundError", p.A.Name, err)
	}
	var lo Info
	err = a.Do(func() error {
		if _, err := Get("xk-missing"); !errors.Is(err, ErrNoDevice) {
			t.Errorf("Get(missing): %v, want ErrNoDevice", err)
		}
		if _, err := GetByIndex(p.A.Index + 1000); !errors.Is(err, ErrNoDevice) {
			t.Errorf("GetByIndex(missing): %v, want ErrNoDevice", err)
		}
		// Loopback: no driver info, no channels, but an answer.
		var err error
		lo, err = Get("lo")
		if err != nil {
			return err
		}
		if lo.Index != 1 || lo.QueuesFrom != QueuesFromNetlink || lo.RxQueues < 1 {
			t.Errorf("lo: %v (queues from %s)", lo, lo.QueuesFrom)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lo.FeaturesFrom != FromNetdevGenl {
		vethns.NotApplicable(t, "netdev genetlink family", checkFamilyMissing(t, lo))
	}
}

func TestSetRxCsumOffload(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	for _, on := range []bool{false, true, false} {
		err := a.Do(func() error {
			if err := SetRxCsumOffload(p.A.Name, on); err != nil {
				return err
			}
			fd, err := ioctlSocket()
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			feats, err := featuresActive(fd, p.A.Name)
			if err != nil {
				return err
			}
			if feats["rx-checksum"] != on {
				t.Errorf("after SetRxCsumOffload(%v): rx-checksum feature %v", on, feats["rx-checksum"])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Do(func() error { return SetRxCsumOffload("xk-none", true) }); !errors.Is(err, ErrNoDevice) {
		t.Errorf("SetRxCsumOffload on a missing device: %v, want ErrNoDevice", err)
	}
}

// attachPass attaches an XDP program that passes every packet to the
// interface l, in its namespace, and returns the link; the test's end
// closes the program (and detaches it, if the test did not).
func attachPass(t *testing.T, l *vethns.Link) link.Link {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load XDP program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	var xl link.Link
	if err := l.NS.Do(func() (err error) {
		xl, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: l.Index})
		return err
	}); err != nil {
		t.Fatalf("attach XDP to %s: %v", l.Name, err)
	}
	t.Cleanup(func() { xl.Close() })
	return xl
}

// checkFamilyMissing checks the fallback of an Info read without the
// netdev family: the family really does not resolve here (Linux 6.3 brought
// it), and the XDP and XSK features are unknown (0) rather than guessed.
// It returns what the family lookup said.
func checkFamilyMissing(t *testing.T, info Info) string {
	t.Helper()
	c, err := dialNetdev()
	if err == nil {
		c.Close()
		t.Fatalf("%s: features from %q, but the netdev family resolves", info.Name, info.FeaturesFrom)
	}
	if !errors.Is(err, errFamilyMissing) {
		t.Fatalf("%s: features from %q; the netdev family: %v", info.Name, info.FeaturesFrom, err)
	}
	if info.FeaturesFrom != FromEthtool || info.XDPFeatures != 0 || info.XSKFeatures != 0 || info.XDPRxMetadata != 0 || info.XDPZeroCopyMaxSegs != 0 {
		t.Errorf("%s without the netdev family: %v; want features from ethtool, all unknown (0)", info.Name, info)
	}
	return fmt.Sprintf("%s: %v", info.Name, err)
}
