package xsk

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestDeviceSettings sets a veth's MTU through SetMTU and reads it back
// with MTU; an MTU above veth's maximum fails with ErrDeviceRefused and
// leaves the MTU as it was; veth has no ring parameters, so Rings and
// SetRings fail with ErrNotSupported; a missing device is ErrNoDevice.
func TestDeviceSettings(t *testing.T) {
	vethns.Require(t)
	ns := vethns.NewNS(t)
	p := vethns.NewPair(t, ns, ns, nil)
	name := p.A.Name
	err := ns.Do(func() error {
		was, err := MTU(name)
		if err != nil {
			return fmt.Errorf("MTU(%s): %w", name, err)
		}
		for _, want := range []int{9000, 1280, was} {
			if err := SetMTU(name, want); err != nil {
				return fmt.Errorf("SetMTU(%s, %d): %w", name, want, err)
			}
			if got, err := MTU(name); err != nil || got != want {
				return fmt.Errorf("after SetMTU(%d): MTU = %d, %v", want, got, err)
			}
		}
		if err := SetMTU(name, 1<<20); !errors.Is(err, ErrDeviceRefused) {
			t.Errorf("SetMTU(%s, 1 MiB) = %v, want ErrDeviceRefused", name, err)
		}
		if got, err := MTU(name); err != nil || got != was {
			t.Errorf("after a refused SetMTU: MTU = %d, %v; want %d", got, err, was)
		}
		if _, err := Rings(name); !errors.Is(err, ErrNotSupported) {
			t.Errorf("Rings(%s) = %v, want ErrNotSupported", name, err)
		}
		if err := SetRings(name, 256, 256); !errors.Is(err, ErrNotSupported) {
			t.Errorf("SetRings(%s) = %v, want ErrNotSupported", name, err)
		}
		const missing = "xk-no-such-if"
		if err := SetMTU(missing, 1500); !errors.Is(err, ErrNoDevice) {
			t.Errorf("SetMTU(%s) = %v, want ErrNoDevice", missing, err)
		}
		if _, err := MTU(missing); !errors.Is(err, ErrNoDevice) {
			t.Errorf("MTU(%s) = %v, want ErrNoDevice", missing, err)
		}
		if _, err := Rings(missing); !errors.Is(err, ErrNoDevice) {
			t.Errorf("Rings(%s) = %v, want ErrNoDevice", missing, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
