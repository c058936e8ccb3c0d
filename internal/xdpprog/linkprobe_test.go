package xdpprog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestXDPLinkProbe checks the probe that tells an EINVAL from a kernel
// without XDP links (before 5.9) from the attach's own EINVAL. On this
// kernel the probe must find links, so an EINVAL is returned as the
// attach's error instead of falling back to rtnetlink (which would leave
// the program attached after the process dies). The EINVAL made here is a
// device-bound program (RX metadata kfuncs) attached to another device:
// the probe must not be misled by it either.
func TestXDPLinkProbe(t *testing.T) {
	if vethns.KernelBefore(5, 9) {
		t.Skip("kernel before 5.9: no XDP links to find") // never under CI=true on a supported kernel
	}
	nsA, nsB, pr := pair(t, nil)
	var p *Program
	if err := nsA.Do(func() (err error) {
		p, err = Load(&Config{Filter: &Filter{IPv4UDP: true}, Metadata: true, Ifindex: pr.A.Index})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if lvl, why := p.Metadata(); lvl == MetaXDPTimeOnly && errors.Is(why, btf.ErrNotFound) && !kfuncsInBTF(t) {
		vethns.NotApplicable(t, "RX metadata kfuncs", "a device-bound program needs them: "+why.Error())
		return
	} else if lvl != MetaKfuncs {
		t.Fatalf("metadata level %v (%v): the test needs a device-bound program", lvl, why)
	}
	// Bound to A's device, attached to B's (in B's namespace): EINVAL
	// from BPF_LINK_CREATE ("program bound to different device").
	err := nsB.Do(func() error {
		_, err := p.Attach(pr.B.Index, ModeNative)
		return err
	})
	if err == nil {
		t.Fatal("a program bound to one device attached to another")
	}
	t.Logf("attach to the other device: %v", err)
	if !haveXDPLinks() {
		t.Fatal("probe found no XDP bpf_links on a kernel that has them")
	}
	if x := xdpState(t, nsB, pr.B.Index); x.Attached {
		t.Fatalf("the refused attach left a program on %s: %+v", pr.B.Name, x)
	}
	if noXDPLink(fmt.Errorf("create link: %w", unix.EINVAL)) {
		t.Error("an EINVAL from BPF_LINK_CREATE is taken for a kernel without XDP links")
	}
	if !noXDPLink(fmt.Errorf("probe: %w", ebpf.ErrNotSupported)) {
		t.Error("ebpf.ErrNotSupported (no BPF_LINK_CREATE) does not fall back to rtnetlink")
	}
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Log("(the kernel answered EOPNOTSUPP, not EINVAL)")
	}
}
