package apps_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// xdpAttached reports whether link name in ns has an XDP program.
func xdpAttached(t *testing.T, ns *vethns.NS, name string) bool {
	t.Helper()
	var on bool
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		on = l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return on
}

// TestGenTXProgram: xdpgen with the TX program rule forced on (as the
// driver table has it for i40e, ixgbe, ice and mlx5_core) attaches a
// native pass program while it sends and leaves none behind; with the
// default rule on veth it attaches none.
func TestGenTXProgram(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	gen, err := topo.Start(a, path("xdpgen"), nil, "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(),
		"-count", "20000", "-rate", "2k", "-quiet", "-tx-program", "always")
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Stop(5 * time.Second)
	seen := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !seen; {
		select {
		case <-gen.Done():
			t.Fatalf("xdpgen ended before its program was seen: %v: %s", gen.Err(), gen.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
		seen = xdpAttached(t, a, p.A.Name)
	}
	if !seen {
		t.Fatal("xdpgen -tx-program always: no XDP program on the interface while it sends")
	}
	gen.Stop(10 * time.Second)
	<-gen.Done()
	if xdpAttached(t, a, p.A.Name) {
		t.Error("the TX program stayed attached after xdpgen ended")
	}

	// The default rule on veth (copy mode, not in the table as needing
	// one): none while it sends.
	stdout, stderr, code := runIn(t, a, 60*time.Second, "xdpgen", "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(), "-count", "200", "-rate", "1k", "-quiet")
	if code != 0 {
		t.Fatalf("xdpgen: exit %d: %s %s", code, stdout, stderr)
	}
}

// TestNICFlagErrors: the frame size and filter flags refuse bad values
// with the flag's name.
func TestNICFlagErrors(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	for _, tc := range []struct {
		app  string
		args []string
		want string
	}{
		{"xdprecv", []string{"-frame-size", "3000"}, "-frame-size"},
		{"xdprecv", []string{"-vlan", "5000"}, "-vlan"},
		{"xdprecv", []string{"-src-port", "9-1"}, "-src-port"},
		{"xdpfwd", []string{"-src-prefix", "nonsense"}, "-src-prefix"},
		{"xdpfwd", []string{"-ethertype", "0x0800"}, "EtherType"},
		{"xdpgen", []string{"-dst", p.B.IPv4.Addr().String(), "-tx-program", "sometimes"}, "TX program"},
	} {
		args := append([]string{"-i", p.A.Name}, tc.args...)
		_, stderr, code := runIn(t, a, 30*time.Second, tc.app, args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s %q: exit %d, stderr %q; want a failure naming %q", tc.app, tc.args, code, stderr, tc.want)
		}
	}
}
