package vethns_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestPublicTypes: the types a user fills in or reads are defined in
// package xsk, not aliases of internal ones (go doc hides an alias's
// fields).
func TestPublicTypes(t *testing.T) {
	for _, v := range []any{xsk.Filter{}, xsk.DeviceInfo{}, xsk.AttachMode(0), xsk.CapabilityError{},
		xsk.XDPFeatures(0), xsk.XSKFeatures(0), xsk.RxMetadataFeatures(0), xsk.ProgramConfig{}} {
		if ty := reflect.TypeOf(v); ty.PkgPath() != "github.com/xdpkit/xdpkit/xsk" {
			t.Errorf("%v is defined in %s", ty, ty.PkgPath())
		}
	}
}

// TestAPIErrors: errors a new user meets are matchable and say what is
// wrong: a program attached to a busy interface matches xsk.ErrBusy; a
// missing capability is an *xsk.CapabilityError (from umem too) without
// cilium/ebpf's misleading RLIMIT_MEMLOCK hint. And the device's MAC
// address is known.
func TestAPIErrors(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)

	err := a.Do(func() error {
		info, err := xsk.Device(p.A.Name)
		if err != nil {
			return err
		}
		if !bytes.Equal(info.HardwareAddr, p.A.MAC) {
			t.Errorf("Device: HardwareAddr %v, want %v", info.HardwareAddr, p.A.MAC)
		}
		u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 64})
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(p.A.Name, 0, u, nil)
		if err != nil {
			return err
		}
		defer s.Close()
		if !bytes.Equal(s.HardwareAddr(), p.A.MAC) {
			t.Errorf("Socket.HardwareAddr %v, want %v", s.HardwareAddr(), p.A.MAC)
		}

		first, err := xsk.AttachProgram(p.A.Name, &xsk.ProgramConfig{Mode: xsk.AttachNative})
		if err != nil {
			return err
		}
		defer first.Close()
		second, err := xsk.AttachProgram(p.A.Name, &xsk.ProgramConfig{Mode: xsk.AttachNative})
		if err == nil {
			second.Close()
			t.Error("a second program attached to the same hook")
		} else if !errors.Is(err, xsk.ErrBusy) {
			t.Errorf("second AttachProgram: %v, does not match xsk.ErrBusy", err)
		} else {
			t.Logf("second AttachProgram: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Capabilities are per thread: drop them on a locked thread in a
	// that is never unlocked (the runtime discards it).
	without := func(drop uint, op func() error) error {
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			h, err := netns.GetFromPath(a.Path())
			if err != nil {
				errc <- err
				return
			}
			defer h.Close()
			if err := netns.Set(h); err != nil {
				errc <- err
				return
			}
			var keep []uint
			for _, c := range []uint{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW, unix.CAP_BPF, unix.CAP_IPC_LOCK} {
				if c != drop {
					keep = append(keep, c)
				}
			}
			if err := setEffective(keep); err != nil {
				errc <- err
				return
			}
			errc <- op()
		}()
		return <-errc
	}
	for _, tc := range []struct {
		name string
		cap  uint
		op   func() error
	}{
		{"CAP_BPF", unix.CAP_BPF, func() error {
			prog, err := xsk.AttachProgram(p.A.Name, nil)
			if err == nil {
				prog.Close()
			}
			return err
		}},
		{"CAP_NET_RAW", unix.CAP_NET_RAW, func() error {
			u, err := umem.New(&umem.Config{FrameCount: 64})
			if err == nil {
				u.Close()
			}
			return err
		}},
	} {
		err := without(tc.cap, tc.op)
		var ce *xsk.CapabilityError
		switch {
		case err == nil:
			t.Errorf("succeeded without %s", tc.name)
		case !errors.As(err, &ce) || !strings.Contains(ce.Cap, tc.name) || !errors.Is(err, os.ErrPermission):
			t.Errorf("without %s: %v (%T), want an *xsk.CapabilityError naming it", tc.name, err, err)
		case strings.Contains(err.Error(), "MEMLOCK"):
			t.Errorf("without %s: %q repeats the RLIMIT_MEMLOCK hint", tc.name, err)
		default:
			t.Logf("without %s: %v", tc.name, err)
		}
	}
}
