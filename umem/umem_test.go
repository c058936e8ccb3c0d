package umem

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/kfeature"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("UMEM registration needs root (CAP_NET_RAW, CAP_IPC_LOCK); CI runs as root")
		}
		t.Skip("needs root")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want error
	}{
		{Config{FrameSize: 1024}, ErrFrameSize},
		{Config{FrameSize: 3000}, ErrFrameSize},
		{Config{FrameSize: 8192}, ErrFrameSize},
		{Config{FrameCount: 1<<24 + 1}, ErrFrameCount},
		{Config{TxMetadataLen: 12}, ErrMetadataLen},
		{Config{TxMetadataLen: 256}, ErrMetadataLen},
		{Config{FrameSize: 2048, Headroom: 1800}, ErrHeadroom},
	} {
		u, err := New(&tc.cfg)
		if !errors.Is(err, tc.want) {
			t.Errorf("New(%+v) = %v, want %v", tc.cfg, err, tc.want)
		}
		if u != nil {
			t.Errorf("New(%+v) returned a UMEM with an error", tc.cfg)
		}
	}
}

func TestAllocator(t *testing.T) {
	needRoot(t)
	u, err := New(&Config{FrameSize: 2048, FrameCount: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if got := u.Accounting(); got != (Accounting{Total: 64, Free: 64}) {
		t.Fatalf("fresh UMEM: %s", got)
	}
	seen := map[uint64]bool{}
	var addrs [64]uint64
	n := u.GetBatch(addrs[:10])
	a, ok := u.Get()
	if n != 10 || !ok {
		t.Fatalf("GetBatch = %d, Get ok = %v", n, ok)
	}
	for _, x := range append(addrs[:10:10], a) {
		if x%2048 != 0 || x >= u.Size() || seen[x] {
			t.Fatalf("bad or duplicate frame address %#x", x)
		}
		seen[x] = true
		if f := u.Frame(x); len(f) != 2048 {
			t.Fatalf("Frame(%#x) has %d bytes", x, len(f))
		}
	}
	if got := u.Accounting(); got.Held != 11 || got.Free != 53 {
		t.Fatalf("after taking 11: %s", got)
	}
	u.Moved(Held, Fill, 5)
	u.Moved(Fill, Held, 2)
	u.Moved(Held, TX, 4)
	if got := u.Accounting(); got.Fill != 3 || got.TX != 4 || got.Held != 4 || got.Free != 53 {
		t.Fatalf("after moves: %s", got)
	}
	u.Moved(Fill, Held, 3)
	u.Moved(TX, Held, 4)
	if err := u.Put(a + 100); err != nil { // an address inside the frame
		t.Fatal(err)
	}
	if err := u.Put(a); !errors.Is(err, ErrDoubleFree) {
		t.Fatalf("double free: %v", err)
	}
	if err := u.Put(u.Size()); !errors.Is(err, ErrBadAddress) {
		t.Fatalf("address past the end: %v", err)
	}
	if err := u.PutBatch(addrs[:10]); err != nil {
		t.Fatal(err)
	}
	if got := u.Accounting(); got != (Accounting{Total: 64, Free: 64}) {
		t.Fatalf("after returning all: %s", got)
	}
	// Exhaustion.
	if n := u.GetBatch(addrs[:]); n != 64 {
		t.Fatalf("GetBatch(64) = %d", n)
	}
	if _, ok := u.Get(); ok {
		t.Fatal("Get succeeded on an empty allocator")
	}
	if err := u.PutBatch(addrs[:]); err != nil {
		t.Fatal(err)
	}
}

func TestDataBounds(t *testing.T) {
	needRoot(t)
	u, err := New(&Config{FrameSize: 2048, FrameCount: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, tc := range []struct {
		addr uint64
		n    uint32
		ok   bool
	}{
		{0, 2048, true}, {256, 1792, true}, {256, 1793, false}, {2047, 1, true},
		{3 * 2048, 2048, true}, {4 * 2048, 1, false}, {1 << 40, 1, false}, {100, 0, true},
	} {
		b, ok := u.Data(tc.addr, tc.n)
		if ok != tc.ok || (ok && len(b) != int(tc.n)) {
			t.Errorf("Data(%d, %d) = %d bytes, %v; want ok=%v", tc.addr, tc.n, len(b), ok, tc.ok)
		}
	}
}

func TestTxMetadataAt(t *testing.T) {
	needRoot(t)
	u, err := New(&Config{FrameSize: 2048, FrameCount: 4, TxMetadataLen: TxMetadataSize})
	if errors.Is(err, ErrNotSupported) {
		kfeature.NotApplicable(t, "XDP_UMEM_TX_METADATA_LEN", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if md := u.TxMetadataAt(2048 + 10); md != nil {
		t.Fatal("metadata area returned where it does not fit in the frame")
	}
	md := u.TxMetadataAt(2048 + TxMetadataSize)
	if md == nil {
		t.Fatal("no metadata area")
	}
	md.Flags = TxMetadataChecksum
	md.CsumStart = 0x1234
	md.CsumOffset = 6
	f := u.Frame(2048)
	if f[0] != TxMetadataChecksum || f[8] != 0x34 || f[9] != 0x12 || f[10] != 6 {
		t.Fatalf("metadata bytes % x", f[:TxMetadataSize])
	}
}

func TestCloseBusyAndIdempotent(t *testing.T) {
	needRoot(t)
	u, err := New(&Config{FrameCount: 16})
	if err != nil {
		t.Fatal(err)
	}
	fd, shared, _, err := u.AttachSocket()
	if err != nil || fd < 0 || shared != -1 {
		t.Fatalf("AttachSocket = %d, %d, %v", fd, shared, err)
	}
	if err := u.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a socket: %v", err)
	}
	u.SocketBound(fd, 8)
	fd2, shared, flags, err := u.AttachSocket()
	if err != nil || fd2 != -1 || shared < 0 || shared == fd || flags != 8 {
		t.Fatalf("second AttachSocket = %d, %d, %d, %v; want a duplicate of %d", fd2, shared, flags, err, fd)
	}
	if same, err := sameFile(shared, fd); err != nil || !same {
		t.Fatalf("shared fd %d is not a duplicate of %d (%v)", shared, fd, err)
	}
	unix.Close(shared)
	u.DetachSocket(-1)
	u.DetachSocket(fd)
	unix.Close(fd) // as the socket would
	// No socket left: the next one gets a fresh registration.
	fd3, shared, _, err := u.AttachSocket()
	if err != nil || fd3 < 0 || shared != -1 {
		t.Fatalf("AttachSocket after the last socket closed = %d, %d, %v", fd3, shared, err)
	}
	u.DetachSocket(fd3)
	unix.Close(fd3)
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, _, err := u.AttachSocket(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("AttachSocket after Close: %v", err)
	}
}

// TestHugePages needs a free 2 MiB huge page for its success path: .ci/run
// reserves a few, and the test, as root, reserves one itself (restoring
// vm.nr_hugepages afterwards) when none is free. Only where none can be
// had does it check the error instead, and under CI=true that fails.
func TestHugePages(t *testing.T) {
	needRoot(t)
	if freeHugePages(t) == 0 {
		reserveHugePage(t)
	}
	free := freeHugePages(t)
	u, err := New(&Config{FrameCount: 512, HugePages: true}) // 2 MiB: one huge page
	if free == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no free huge page could be reserved (vm.nr_hugepages); CI must run the success path (New = %v)", err)
		}
		if !errors.Is(err, ErrNoHugePages) {
			t.Fatalf("no huge pages free, New = %v, want ErrNoHugePages", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%d huge pages free, New = %v", free, err)
	}
	defer u.Close()
	if !u.HugePages() || uintptrOf(u.Bytes())%HugePageSize != 0 {
		t.Fatal("huge-page UMEM is not 2 MiB aligned")
	}
	t.Logf("UMEM on a huge page (%d were free)", free)
	if after := freeHugePages(t); after != free-1 {
		t.Errorf("free huge pages %d -> %d with the UMEM mapped, want one fewer", free, after)
	}
}

// freeHugePages reads HugePages_Free (default size, 2 MiB) from /proc/meminfo.
func freeHugePages(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "HugePages_Free:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no HugePages_Free in /proc/meminfo")
	return 0
}

// reserveHugePage raises vm.nr_hugepages by one and restores it in
// t.Cleanup. The kernel may find no free 2 MiB of memory; the caller reads
// HugePages_Free again.
func reserveHugePage(t *testing.T) {
	const knob = "/proc/sys/vm/nr_hugepages"
	b, err := os.ReadFile(knob)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(knob, []byte(strconv.Itoa(n+1)), 0); err != nil {
		t.Logf("reserving a huge page: %v", err)
		return
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, []byte(old), 0); err != nil {
			t.Errorf("restoring %s to %s: %v", knob, old, err)
		}
	})
}

func TestNoLeakAcrossCycles(t *testing.T) {
	needRoot(t)
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	before := fds()
	for i := 0; i < 50; i++ {
		u, err := New(&Config{FrameCount: 256})
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if after := fds(); after > before {
		t.Fatalf("file descriptors: %d before, %d after 50 cycles", before, after)
	}
}

func BenchmarkGetPut(b *testing.B) {
	u, err := New(&Config{FrameCount: 4096})
	if err != nil {
		b.Skip(err)
	}
	defer u.Close()
	var addrs [64]uint64
	b.ReportAllocs()
	for b.Loop() {
		n := u.GetBatch(addrs[:])
		_ = u.PutBatch(addrs[:n])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/frame")
}

// sameFile reports whether two descriptors name the same open file.
func sameFile(a, b int) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(a, &sa); err != nil {
		return false, err
	}
	if err := unix.Fstat(b, &sb); err != nil {
		return false, err
	}
	return sa.Ino == sb.Ino && sa.Dev == sb.Dev, nil
}

// TestConcurrentFirstSockets: sockets attached while the first is not yet
// bound wait for it, then share its registration instead of making one
// of their own.
func TestConcurrentFirstSockets(t *testing.T) {
	needRoot(t)
	u, err := New(&Config{FrameCount: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	fd, _, _, err := u.AttachSocket()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		_, shared, _, err := u.AttachSocket()
		if err != nil {
			shared = -2
		}
		got <- shared
	}()
	select {
	case s := <-got:
		t.Fatalf("second AttachSocket returned (%d) before the first socket bound", s)
	case <-time.After(50 * time.Millisecond):
	}
	u.SocketBound(fd, 0)
	shared := <-got
	if same, err := sameFile(shared, fd); err != nil || !same {
		t.Fatalf("second socket got %d, not a duplicate of the first's %d (%v)", shared, fd, err)
	}
	unix.Close(shared)
	u.DetachSocket(-1)
	u.DetachSocket(fd)
	unix.Close(fd)
}
