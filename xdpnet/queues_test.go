package xdpnet_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/xdpnet"
)

// TestQueues: the default queue set is the queues in use, not those
// allocated; a queue id of 64 or more works; Config.Queues outside the
// queues in use, or given twice, is refused with ErrConfig.
func TestQueues(t *testing.T) {
	inUse := func(n int) func(*bed) error {
		return func(bd *bed) error {
			ch, err := netdev.SetQueues(bd.p.A.Name, n)
			if err == nil && ch.Queues() != n {
				err = errors.New("queue count not set")
			}
			return err
		}
	}
	t.Run("default", func(t *testing.T) {
		// 4 queues allocated, 1 in use.
		bd, err := newBedConfig(t, false, &vethns.PairConfig{Queues: 4}, nil, inUse(1))
		if err != nil {
			t.Fatalf("ListenUDP: %v", err)
		}
		if ids := bd.c.QueueIDs(); !slices.Equal(ids, []int{0}) {
			t.Errorf("queues %v, want [0]", ids)
		}
		bd.echo(t)
		c := bd.dial(t)
		vethns.WaitEcho(t, c)
		vethns.RoundTrips(t, c, 20)
	})
	t.Run("queue 70", func(t *testing.T) {
		bd, err := newBedConfig(t, true, &vethns.PairConfig{Queues: 72}, &xdpnet.Config{Queues: []int{0, 70}, FrameCount: 256}, nil)
		if err != nil {
			t.Fatalf("ListenUDP: %v", err)
		}
		if ids := bd.c.QueueIDs(); !slices.Equal(ids, []int{0, 70}) {
			t.Errorf("queues %v, want [0 70]", ids)
		}
		bd.echo(t)
		c := bd.dial(t)
		vethns.WaitEcho(t, c)
		vethns.RoundTrips(t, c, 20)
	})
	for _, qs := range [][]int{{1}, {0, 0}, {-1}} {
		_, err := newBedConfig(t, false, &vethns.PairConfig{Queues: 2}, &xdpnet.Config{Queues: qs}, inUse(1))
		if !errors.Is(err, xdpnet.ErrConfig) {
			t.Errorf("Queues %v with 1 queue in use: %v, want ErrConfig", qs, err)
		}
	}
}
