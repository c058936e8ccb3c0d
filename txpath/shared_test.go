package txpath_test

import (
	"errors"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestNewRefusesSharedRings: a socket of xsk.NewShared, and its first
// socket while it is open, are refused with ErrConfig (a Sender reaps
// every completion of its socket's Completion ring as its own, and these
// share it); the first socket is taken again once the shared one is
// closed.
func TestNewRefusesSharedRings(t *testing.T) {
	vethns.Require(t)
	a := vethns.NewNS(t)
	p := vethns.NewPair(t, a, vethns.NewNS(t), nil)
	first, shared := vethns.SharedSockets(t, a, p.A.Name)
	cfg := &txpath.Config{Policy: txpath.Plain, BatchSize: 16}
	for name, s := range map[string]*xsk.Socket{"NewShared's socket": shared, "the first socket": first} {
		if snd, err := txpath.New(s, cfg); !errors.Is(err, txpath.ErrConfig) {
			if snd != nil {
				snd.Close()
			}
			t.Errorf("txpath.New(%s): %v, want ErrConfig", name, err)
		}
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	snd, err := txpath.New(first, cfg)
	if err != nil {
		t.Fatalf("txpath.New(the first socket, alone again): %v", err)
	}
	if err := snd.Close(); err != nil {
		t.Fatal(err)
	}
}
