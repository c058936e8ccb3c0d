package xsk

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
)

// TestTXBudget: a MaxTXBudget outside [32, TX ring size] (the kernel's
// EACCES) fails with ErrTXBudget, not as a missing capability; one inside
// is used and reported; a kernel that lacks the option is
// TestLibraryWithoutOptionalFeatures' (test/vethns) business.
func TestTXBudget(t *testing.T) {
	vethns.Require(t)
	ns := vethns.NewNS(t)
	p := vethns.NewPair(t, ns, vethns.NewNS(t), nil)
	var f Features
	err := ns.Do(func() error {
		u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 256})
		if err != nil {
			return err
		}
		defer u.Close()
		for _, c := range []Config{
			{MaxTXBudget: 256, TXSize: 64},
			{MaxTXBudget: 16},
			{MaxTXBudget: 64, NoTX: true},
		} {
			s, err := New(p.A.Name, 0, u, &c)
			if err == nil {
				s.Close()
			}
			var ce *CapabilityError
			if !errors.Is(err, ErrTXBudget) || errors.As(err, &ce) || errors.Is(err, os.ErrPermission) {
				t.Errorf("%+v: %v, want ErrTXBudget", c, err)
			}
		}
		s, err := New(p.A.Name, 0, u, &Config{MaxTXBudget: 64, TXSize: 64, NoRX: true})
		if err != nil {
			return err
		}
		defer s.Close()
		f = s.Features()
		if f.Stats != StatsExtended || f.ZeroCopy || !f.NeedWakeup {
			t.Errorf("features %+v", f)
		}
		if f.NoTXBudget {
			// The kernel lacks the option: its own budget is kept (as
			// TestLibraryWithoutOptionalFeatures checks), and said.
			if f.TXBudget != 0 || !strings.Contains(f.String(), "no XDP_MAX_TX_SKB_BUDGET") {
				t.Errorf("without XDP_MAX_TX_SKB_BUDGET: features %+v say %q", f, f)
			}
			return nil
		}
		if f.TXBudget != 64 {
			t.Errorf("features %+v: want TX budget 64", f)
		}
		if !strings.Contains(f.String(), "TX budget 64") {
			t.Errorf("features say %q", f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.NoTXBudget {
		vethns.NotApplicable(t, "XDP_MAX_TX_SKB_BUDGET", f.String())
	}
}
