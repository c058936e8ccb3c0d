package seccomp

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/kfeature"
)

const childEnv = "XK_SECCOMP_CHILD"

// calls makes each call a rule takes away, and one like it that no rule
// touches, and returns their errnos (0: success).
func calls(t *testing.T) map[string][2]error {
	t.Helper()
	got := map[string][2]error{}
	xsk, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no AF_XDP socket: %v", err)
	}
	defer unix.Close(xsk)
	got["tx-budget"] = [2]error{
		unix.SetsockoptInt(xsk, unix.SOL_XDP, 9, 64),
		unix.SetsockoptInt(xsk, unix.SOL_XDP, unix.XDP_TX_RING, 64),
	}
	var st [48]byte
	size := uint32(len(st))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(xsk), unix.SOL_XDP, unix.XDP_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0)
	_, opterr := unix.GetsockoptInt(xsk, unix.SOL_XDP, unix.XDP_OPTIONS)
	got["stats"] = [2]error{errnoOrNil(e), opterr}
	nl := func(proto int) error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	got["genl"] = [2]error{nl(unix.NETLINK_GENERIC), nl(unix.NETLINK_ROUTE)}
	// BPF_LINK_CREATE on bad descriptors: EBADF when the kernel looks.
	var attr [64]byte
	*(*uint32)(unsafe.Pointer(&attr[0])) = ^uint32(0)
	*(*uint32)(unsafe.Pointer(&attr[4])) = ^uint32(0)
	_, _, e = unix.Syscall(unix.SYS_BPF, unix.BPF_LINK_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	_, _, e2 := unix.Syscall(unix.SYS_BPF, unix.BPF_OBJ_GET_INFO_BY_FD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	got["bpf-link"] = [2]error{errnoOrNil(e), errnoOrNil(e2)}
	// XDP_UMEM_REG with the long struct (flags) and the short one, each
	// on a socket of its own.
	reg := func(size uintptr) error {
		fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		mem, err := unix.Mmap(-1, 0, 16*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return err
		}
		defer unix.Munmap(mem)
		r := struct {
			addr, len                             uint64
			chunk, headroom, flags, txMetadataLen uint32
		}{uint64(uintptr(unsafe.Pointer(&mem[0]))), uint64(len(mem)), 4096, 0, 0, 0}
		if size == 32 {
			r.flags = 1 << 1 // XDP_UMEM_TX_SW_CSUM
		}
		_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG, uintptr(unsafe.Pointer(&r)), size, 0)
		return errnoOrNil(e)
	}
	got["umem-flags"] = [2]error{reg(32), reg(24)}
	got["busy-poll"] = [2]error{
		unix.SetsockoptInt(xsk, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1),
		unix.SetsockoptInt(xsk, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<16),
	}
	return got
}

func errnoOrNil(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func str(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// TestFilter makes the calls in a child process under every rule: each
// taken-away call must fail with the rule's errno (and not without the
// filter), and the call next to it must answer as it does without the
// filter.
func TestFilter(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		if err := Install(Names()...); err != nil {
			t.Fatal(err)
		}
		for name, r := range calls(t) {
			fmt.Printf("result %s\t%s\t%s\n", name, str(r[0]), str(r[1]))
		}
		return
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (AF_XDP socket)")
		}
		t.Skip("needs root (AF_XDP socket)")
	}
	free := calls(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFilter$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimPrefix(line, "result "), "\t")
		if !strings.HasPrefix(line, "result ") || len(f) != 3 {
			continue
		}
		seen++
		name, r := f[0], free[f[0]]
		want := Rules[name].errno.Error()
		switch {
		case f[1] != want:
			t.Errorf("%s: filtered %q; want %q", name, f[1], want)
		case str(r[0]) == want:
			// This kernel lacks the feature: its own answer is the one
			// the filter imitates, so the two agree. Unless the kernel's
			// BTF shows it has the feature after all: then the rule's
			// test call is broken.
			if feat, ok := ruleFeature[name]; ok {
				if has, known, err := kfeature.KernelHas(feat); err != nil || known && has {
					t.Errorf("%s: the unfiltered call answers %q, but the kernel has %s (%v)", name, want, feat, err)
					continue
				}
			}
			t.Logf("%s: this kernel lacks it and answers %q itself, as the filter does", name, want)
		}
		if f[2] != str(r[1]) {
			t.Errorf("%s: the call next to it: filtered %q, unfiltered %q", name, f[2], str(r[1]))
		}
		t.Logf("%s: %s (unfiltered: %s); next to it: %s", name, f[1], str(r[0]), f[2])
	}
	if seen != len(Rules) {
		t.Fatalf("child reported %d of %d rules:\n%s", seen, len(Rules), out)
	}
}

// ruleFeature names the kernel feature (internal/kfeature) each rule takes
// away, where the kernel's BTF can tell whether the kernel has it.
var ruleFeature = map[string]string{
	"tx-budget": "XDP_MAX_TX_SKB_BUDGET",
	"bpf-link":  "XDP attached as a bpf_link",
}

func TestProgramUnknownRule(t *testing.T) {
	if _, err := Program("no-such-feature"); err == nil {
		t.Error("unknown rule accepted")
	}
}
