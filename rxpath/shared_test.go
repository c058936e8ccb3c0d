package rxpath_test

import (
	"errors"
	"testing"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestNewRefusesSharedRings: a socket of xsk.NewShared, and its first
// socket while it is open, are refused with ErrConfig (a Poller owns the
// frames of its sockets' Fill ring, which these share); the first socket
// is taken again once the shared one is closed.
func TestNewRefusesSharedRings(t *testing.T) {
	vethns.Require(t)
	a := vethns.NewNS(t)
	p := vethns.NewPair(t, a, vethns.NewNS(t), nil)
	first, shared := vethns.SharedSockets(t, a, p.A.Name)
	for name, s := range map[string]*xsk.Socket{"NewShared's socket": shared, "the first socket": first} {
		if !s.SharesRings() {
			t.Errorf("%s: SharesRings false", name)
		}
		if pl, err := rxpath.New(nil, s); !errors.Is(err, rxpath.ErrConfig) {
			if pl != nil {
				pl.Close()
			}
			t.Errorf("rxpath.New(%s): %v, want ErrConfig", name, err)
		}
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	if first.SharesRings() {
		t.Error("the first socket: SharesRings true after the shared socket closed")
	}
	pl, err := rxpath.New(nil, first)
	if err != nil {
		t.Fatalf("rxpath.New(the first socket, alone again): %v", err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
}
