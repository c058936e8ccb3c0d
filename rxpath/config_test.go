package rxpath_test

import (
	"errors"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/rxpath"
)

// TestConfigErrors: New rejects a bad Config with ErrConfig before it
// looks at the sockets.
func TestConfigErrors(t *testing.T) {
	for _, c := range []rxpath.Config{
		{Weight: -1},
		{Weight: 1<<16 + 1},
		{Budget: -1},
		{FillBatch: -1},
		{FillFrames: -1},
		{Coalesce: 2 * time.Second},
		{MaxDelay: 2 * time.Second},
		{Coalesce: time.Millisecond, MaxDelay: -1},
		{CopyThreshold: 1<<16 + 1},
		{Spin: true, RuntimeSleep: true},
	} {
		if _, err := rxpath.New(&c); !errors.Is(err, rxpath.ErrConfig) {
			t.Errorf("New(%+v): %v, want ErrConfig", c, err)
		}
	}
	if _, err := rxpath.New(&rxpath.Config{RuntimeSleep: true}); !errors.Is(err, rxpath.ErrNoSockets) {
		t.Errorf("New(RuntimeSleep) with no socket: %v, want ErrNoSockets", err)
	}
}
