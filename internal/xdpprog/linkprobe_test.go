package xdpprog

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestXDPLinkProbe checks the probe that tells an EINVAL from a kernel
// without XDP links (before 5.9) from the attach's own EINVAL: on this
// kernel the probe must find links, so an EINVAL is returned as the
// attach's error instead of falling back to rtnetlink (which would leave
// the program attached after the process dies).
func TestXDPLinkProbe(t *testing.T) {
	p, err := Load(&Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if vethns.KernelBefore(5, 9) {
		t.Skip("kernel before 5.9: no XDP links to find") // never under CI=true on a supported kernel
	}
	if !haveXDPLinks(p.prog.FD()) {
		t.Fatal("probe found no XDP bpf_links on a kernel that has them")
	}
	einval := fmt.Errorf("create link: %w", unix.EINVAL)
	if noXDPLink(einval, p.prog.FD()) {
		t.Error("an EINVAL from BPF_LINK_CREATE is taken for a kernel without XDP links")
	}
	if !noXDPLink(fmt.Errorf("probe: %w", ebpf.ErrNotSupported), p.prog.FD()) {
		t.Error("ebpf.ErrNotSupported (no BPF_LINK_CREATE) does not fall back to rtnetlink")
	}
}
