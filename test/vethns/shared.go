package vethns

import (
	"testing"

	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// SharedSockets opens, inside ns, a copy-mode socket on queue 0 of
// ifname with a UMEM of 64 frames, and a second socket that shares its
// rings ([xsk.NewShared]). When tb ends the shared socket, the first and
// the UMEM close, in that order; closing the shared socket earlier is
// fine.
func SharedSockets(tb testing.TB, ns *NS, ifname string) (first, shared *xsk.Socket) {
	tb.Helper()
	var u *umem.UMEM
	err := ns.Do(func() error {
		var err error
		if u, err = umem.New(&umem.Config{FrameCount: 64}); err != nil {
			return err
		}
		if first, err = xsk.New(ifname, 0, u, &xsk.Config{Mode: xsk.ModeCopy}); err != nil {
			return err
		}
		shared, err = xsk.NewShared(first, nil)
		return err
	})
	tb.Cleanup(func() {
		if shared != nil {
			shared.Close()
		}
		if first != nil {
			first.Close()
		}
		if u != nil {
			u.Close()
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return first, shared
}
