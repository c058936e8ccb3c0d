package xsk

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
)

func newTestMap(t *testing.T, typ ebpf.MapType, key, value, max uint32) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: key, ValueSize: value, MaxEntries: max})
	if err != nil {
		t.Fatalf("create %v: %v", typ, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestUseMapChecksType: only an XSKMAP with 4-byte keys and values is
// taken, and the error says which check failed.
func TestUseMapChecksType(t *testing.T) {
	vethns.Require(t)
	if _, err := UseMap(nil); !errors.Is(err, ErrMapType) {
		t.Errorf("UseMap(nil): %v, want ErrMapType", err)
	}
	arr := newTestMap(t, ebpf.Array, 4, 4, 4)
	if _, err := UseMap(arr); !errors.Is(err, ErrMapType) {
		t.Errorf("UseMap(array): %v, want ErrMapType", err)
	}
	// The kernel refuses an XSKMAP with other key or value sizes, so only
	// the type check can be seen failing here.
	x, err := UseMap(newTestMap(t, ebpf.XSKMap, 4, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	if x.MaxEntries() != 3 {
		t.Errorf("MaxEntries %d, want 3", x.MaxEntries())
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMapRegister registers sockets of a four-queue veth in an XSKMAP of
// two entries, one given as *ebpf.Map and one opened from its pin: queue
// 1 fits, queue 3 is refused with ErrMapRange, Unregister is idempotent,
// a closed Map refuses, and LoadPinnedMap refuses a pinned array.
func TestMapRegister(t *testing.T) {
	vethns.Require(t)
	a := vethns.NewNS(t)
	p := vethns.NewPair(t, a, vethns.NewNS(t), &vethns.PairConfig{Queues: 4})
	em := newTestMap(t, ebpf.XSKMap, 4, 4, 2)
	var s1, s3 *Socket
	err := a.Do(func() error {
		// A UMEM's first socket is made by umem.New, in the calling
		// thread's namespace.
		for _, q := range []struct {
			s   **Socket
			num int
		}{{&s1, 1}, {&s3, 3}} {
			u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 64})
			if err != nil {
				return err
			}
			t.Cleanup(func() { u.Close() })
			if *q.s, err = New(p.A.Name, q.num, u, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if s1 != nil {
		defer s1.Close()
	}
	if s3 != nil {
		defer s3.Close()
	}
	if err != nil {
		t.Fatal(err)
	}

	bpffs := t.TempDir()
	if err := unix.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		t.Fatalf("mount bpffs on %s: %v", bpffs, err)
	}
	t.Cleanup(func() { unix.Unmount(bpffs, unix.MNT_DETACH) })
	pin := filepath.Join(bpffs, "xsks")
	if err := em.Pin(pin); err != nil {
		t.Fatal(err)
	}
	defer em.Unpin()

	used, err := UseMap(em)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := LoadPinnedMap(pin)
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*Map{"UseMap": used, "LoadPinnedMap": pinned} {
		if err := x.Register(s1); err != nil {
			t.Errorf("%s: Register(queue 1): %v", name, err)
		}
		if err := x.Register(s3); !errors.Is(err, ErrMapRange) {
			t.Errorf("%s: Register(queue 3) in a map of 2: %v, want ErrMapRange", name, err)
		}
		if err := x.Unregister(s3); !errors.Is(err, ErrMapRange) {
			t.Errorf("%s: Unregister(queue 3): %v, want ErrMapRange", name, err)
		}
		for i := 0; i < 2; i++ {
			if err := x.Unregister(s1); err != nil {
				t.Errorf("%s: Unregister(queue 1) #%d: %v", name, i+1, err)
			}
		}
		if err := x.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
		if err := x.Close(); err != nil {
			t.Errorf("%s: second Close: %v", name, err)
		}
		if err := x.Register(s1); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: Register after Close: %v, want os.ErrClosed", name, err)
		}
	}
	// UseMap's Close leaves the caller's map open.
	if _, err := em.Info(); err != nil {
		t.Errorf("the caller's map after Map.Close: %v", err)
	}
	// A closed socket is refused.
	x, err := UseMap(em)
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
	s1.Close()
	if err := x.Register(s1); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Register of a closed socket: %v, want os.ErrClosed", err)
	}

	arr := newTestMap(t, ebpf.Array, 4, 4, 4)
	apin := filepath.Join(bpffs, "array")
	if err := arr.Pin(apin); err != nil {
		t.Fatal(err)
	}
	defer arr.Unpin()
	if _, err := LoadPinnedMap(apin); !errors.Is(err, ErrMapType) {
		t.Errorf("LoadPinnedMap(array): %v, want ErrMapType", err)
	}
	if _, err := LoadPinnedMap(filepath.Join(bpffs, "none")); err == nil || errors.Is(err, ErrMapType) {
		t.Errorf("LoadPinnedMap(missing path): %v, want the open error", err)
	}
}

// TestMapKeyErrors: RegisterKey and UnregisterKey name the key, not a
// queue, in their errors, and RegisterKey refuses a nil socket.
func TestMapKeyErrors(t *testing.T) {
	x := &Map{max: 2} // the checks below fail before the map is used
	if err := x.RegisterKey(0, nil); !errors.Is(err, os.ErrInvalid) {
		t.Errorf("RegisterKey(0, nil): %v, want os.ErrInvalid", err)
	}
	for name, err := range map[string]error{
		"RegisterKey":   x.RegisterKey(5, &Socket{}),
		"UnregisterKey": x.UnregisterKey(5),
	} {
		if !errors.Is(err, ErrMapRange) || !strings.Contains(err.Error(), "key 5") || strings.Contains(err.Error(), "queue") {
			t.Errorf("%s(5) in a map of 2: %v, want ErrMapRange naming key 5", name, err)
		}
	}
	for _, err := range []error{
		x.updateError("register", "key", 1, unix.EBADF),
		x.updateError("register", "key", 1, unix.EPERM),
	} {
		if !strings.Contains(err.Error(), "key 1") || strings.Contains(err.Error(), "queue") {
			t.Errorf("update error %q, want it to name key 1", err)
		}
	}
}
