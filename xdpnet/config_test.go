package xdpnet_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/xdpnet"
)

// TestConfigErrors: invalid Configs fail ListenUDP with ErrConfig before
// the interface is touched.
func TestConfigErrors(t *testing.T) {
	addr := netip.MustParseAddrPort("198.18.0.1:53")
	for _, cfg := range []xdpnet.Config{
		{Policy: txpath.Plain},
		{FrameCount: 32},
		{ReadBuffer: -1},
	} {
		c, err := xdpnet.ListenUDP(context.Background(), "xdpnet-none0", addr, &cfg)
		if !errors.Is(err, xdpnet.ErrConfig) {
			t.Errorf("ListenUDP(%+v): %v, want ErrConfig", cfg, err)
		}
		if c != nil {
			c.Close()
		}
	}
}
