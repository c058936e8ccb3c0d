package vethns_test

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

func countFDs(t *testing.T) int {
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

func countMaps(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestXSKOpenCloseCycles: 100 cycles of UMEM + program + socket, each bind
// succeeding (a bind right after a close retries the kernel's EBUSY), with
// no fd, mapping, BPF link or map left over.
func TestXSKOpenCloseCycles(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	err := a.Do(func() error {
		cycle := func() error {
			u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 512})
			if err != nil {
				return err
			}
			prog, err := xsk.AttachProgram(p.A.Name, nil)
			if err != nil {
				u.Close()
				return err
			}
			s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{FillSize: 256, CompletionSize: 256, RXSize: 256, TXSize: 256})
			if err != nil {
				prog.Close()
				u.Close()
				return err
			}
			err = prog.Register(s)
			return errors.Join(err, prog.Close(), s.Close(), s.Close(), u.Close(), u.Close())
		}
		if err := cycle(); err != nil { // warm up: the runtime's own fds and maps
			return err
		}
		fds, maps := countFDs(t), countMaps(t)
		for i := 0; i < 100; i++ {
			if err := cycle(); err != nil {
				t.Errorf("cycle %d: %v", i, err)
				return nil
			}
		}
		if d := countFDs(t) - fds; d > 0 {
			t.Errorf("%d file descriptors leaked over 100 cycles", d)
		}
		if d := countMaps(t) - maps; d > 8 {
			t.Errorf("%d mappings leaked over 100 cycles", d)
		}
		l, err := netlink.LinkByName(p.A.Name)
		if err != nil {
			return err
		}
		if l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached {
			t.Errorf("an XDP program is still attached to %s", p.A.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestXSKBadUse: every misuse gets an error that errors.Is matches, never
// a panic.
func TestXSKBadUse(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: 2})
	err := a.Do(func() error {
		u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 1024})
		if err != nil {
			return err
		}
		defer u.Close()
		check := func(what string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) {
				t.Errorf("%s: got %v, want %v", what, err, want)
			} else {
				t.Logf("%s: %v", what, err)
			}
		}
		_, err = xsk.New("xk-no-such-if", 0, u, nil)
		check("unknown interface", err, xsk.ErrNoDevice)
		_, err = xsk.AttachProgram("xk-no-such-if", nil)
		check("program on unknown interface", err, xsk.ErrNoDevice)
		_, err = xsk.New(p.A.Name, 2, u, nil)
		check("queue beyond the device's count", err, xsk.ErrQueue)
		_, err = xsk.New(p.A.Name, 0, u, &xsk.Config{RXSize: 1000})
		check("ring size not a power of two", err, xsk.ErrRingSize)
		_, err = xsk.New(p.A.Name, 0, u, &xsk.Config{Mode: xsk.ModeZeroCopy})
		check("zero-copy on veth", err, xsk.ErrNotSupported)
		_, err = umem.New(&umem.Config{FrameSize: 1000})
		check("frame size out of range", err, umem.ErrFrameSize)

		s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{BindTimeout: -1})
		if err != nil {
			return err
		}
		defer s.Close()
		u2, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 64})
		if err != nil {
			return err
		}
		defer u2.Close()
		_, err = xsk.New(p.A.Name, 0, u2, &xsk.Config{BindTimeout: 50e6})
		check("two sockets on one queue", err, xsk.ErrBusy)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestXSKCapabilities drops one capability at a time on a locked thread
// (capabilities are per thread) and checks the error names it.
func TestXSKCapabilities(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	ops := []struct {
		cap  uint
		name string
		op   func() error
	}{
		{unix.CAP_NET_RAW, "CAP_NET_RAW", func() error {
			u, err := umem.New(&umem.Config{FrameCount: 64})
			if err == nil {
				u.Close()
			}
			return err
		}},
		{unix.CAP_IPC_LOCK, "CAP_IPC_LOCK", func() error {
			// 64 MiB: beyond RLIMIT_MEMLOCK without CAP_IPC_LOCK.
			u, err := umem.New(&umem.Config{FrameCount: 16384})
			if err == nil {
				u.Close()
			}
			return err
		}},
		{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN", func() error {
			prog, err := xsk.AttachProgram(p.A.Name, nil)
			if err == nil {
				prog.Close()
			}
			return err
		}},
		{unix.CAP_BPF, "CAP_BPF", func() error {
			prog, err := xsk.AttachProgram(p.A.Name, nil)
			if err == nil {
				prog.Close()
			}
			return err
		}},
	}
	// Without CAP_IPC_LOCK a UMEM is charged against RLIMIT_MEMLOCK, which
	// is often unlimited in containers: set the soft limit (for the whole
	// process; rlimits are not per thread) to 8 MiB, below the 64 MiB
	// UMEM, and restore it afterwards.
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: min(8<<20, old.Max), Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
			t.Errorf("restoring RLIMIT_MEMLOCK: %v", err)
		}
	})
	four := []uint{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW, unix.CAP_BPF, unix.CAP_IPC_LOCK}
	// run runs op on a fresh locked thread in namespace a whose effective
	// capabilities are exactly keep. The thread is never unlocked, so
	// the runtime discards it afterwards.
	run := func(keep []uint, op func() error) error {
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
			if err := setEffective(keep); err != nil {
				errc <- err
				return
			}
			errc <- op()
		}()
		return <-errc
	}
	t.Run("all-four", func(t *testing.T) {
		for _, o := range ops {
			if err := run(four, o.op); err != nil {
				t.Errorf("with CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK only: %v", err)
			}
		}
	})
	for _, tc := range ops {
		t.Run("without-"+tc.name, func(t *testing.T) {
			var keep []uint
			for _, c := range four {
				if c != tc.cap {
					keep = append(keep, c)
				}
			}
			err := run(keep, tc.op)
			if err == nil {
				t.Fatalf("succeeded without %s", tc.name)
			}
			if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("without %s: %v (want a permission error naming it)", tc.name, err)
			}
			t.Logf("without %s: %v", tc.name, err)
		})
	}
}

// setEffective sets the current thread's effective capabilities to keep.
func setEffective(keep []uint) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Effective, data[1].Effective = 0, 0
	for _, c := range keep {
		data[c/32].Effective |= 1 << (c % 32)
	}
	return unix.Capset(&hdr, &data[0])
}

// TestXSKOptions: busy-poll options and the TX budget are set on the
// socket (SO_BUSY_POLL reads back), and the socket still binds.
func TestXSKOptions(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	err := a.Do(func() error {
		u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 256})
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(p.A.Name, 0, u, &xsk.Config{
			PreferBusyPoll: true, BusyPollTimeout: 20 * time.Microsecond, BusyPollBudget: 64, MaxTXBudget: 512,
		})
		if err != nil {
			return err
		}
		defer s.Close()
		v, err := unix.GetsockoptInt(s.FD(), unix.SOL_SOCKET, unix.SO_BUSY_POLL)
		if err != nil || v != 20 {
			t.Errorf("SO_BUSY_POLL = %d, %v; want 20", v, err)
		}
		v, err = unix.GetsockoptInt(s.FD(), unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL)
		if err != nil || v != 1 {
			t.Errorf("SO_PREFER_BUSY_POLL = %d, %v; want 1", v, err)
		}
		if s.ZeroCopy() {
			t.Error("veth reported zero-copy")
		}
		if _, err := s.Stats(); err != nil {
			t.Error(err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
