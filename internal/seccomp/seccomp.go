package seccomp

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Rule names a kernel feature and how its absence looks.
type Rule struct {
	Name  string
	Doc   string
	call  map[string]uint32 // system call number by GOARCH
	args  []argEq
	errno unix.Errno
}

type argEq struct {
	i   int
	val uint32
}

// seccomp_data offsets.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// Rules are the features a filter can take away, by name.
var Rules = map[string]Rule{
	"tx-budget": {
		Name: "tx-budget", Doc: "setsockopt(SOL_XDP, XDP_MAX_TX_SKB_BUDGET) fails with ENOPROTOOPT, as before Linux 6.17",
		call: map[string]uint32{"amd64": 54, "arm64": 208}, args: []argEq{{1, unix.SOL_XDP}, {2, 9}}, errno: unix.ENOPROTOOPT,
	},
	"stats": {
		Name: "stats", Doc: "getsockopt(SOL_XDP, XDP_STATISTICS) fails with ENOPROTOOPT",
		call: map[string]uint32{"amd64": 55, "arm64": 209}, args: []argEq{{1, unix.SOL_XDP}, {2, unix.XDP_STATISTICS}}, errno: unix.ENOPROTOOPT,
	},
	"genl": {
		Name: "genl", Doc: "socket(AF_NETLINK, *, NETLINK_GENERIC) fails with EPROTONOSUPPORT: no netdev family to ask (before Linux 6.3)",
		call: map[string]uint32{"amd64": 41, "arm64": 198}, args: []argEq{{0, unix.AF_NETLINK}, {2, unix.NETLINK_GENERIC}}, errno: unix.EPROTONOSUPPORT,
	},
	"bpf-link": {
		Name: "bpf-link", Doc: "bpf(BPF_LINK_CREATE) fails with EINVAL, as before Linux 5.7 (XDP links: 5.9)",
		call: map[string]uint32{"amd64": 321, "arm64": 280}, args: []argEq{{0, unix.BPF_LINK_CREATE}}, errno: unix.EINVAL,
	},
	"umem-flags": {
		Name: "umem-flags", Doc: "setsockopt(SOL_XDP, XDP_UMEM_REG) with the long struct (flags: TX metadata, TX_SW_CSUM) fails with EINVAL, as before Linux 6.8/6.11 (umem registers without them with the short struct)",
		call: map[string]uint32{"amd64": 54, "arm64": 208}, args: []argEq{{1, unix.SOL_XDP}, {2, unix.XDP_UMEM_REG}, {4, 32}}, errno: unix.EINVAL,
	},
	"busy-poll": {
		Name: "busy-poll", Doc: "setsockopt(SOL_SOCKET, SO_PREFER_BUSY_POLL) fails with ENOPROTOOPT, as before Linux 5.11",
		call: map[string]uint32{"amd64": 54, "arm64": 208}, args: []argEq{{1, unix.SOL_SOCKET}, {2, unix.SO_PREFER_BUSY_POLL}}, errno: unix.ENOPROTOOPT,
	},
}

// Names lists the rules' names, sorted.
func Names() []string {
	var n []string
	for k := range Rules {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// Program returns the filter for the named rules on this architecture:
// calls of another architecture (none, in practice) and every other call
// pass.
func Program(names ...string) ([]unix.SockFilter, error) {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("seccomp: no system call numbers for %s", runtime.GOARCH)
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	allow := stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW)
	var rules [][]unix.SockFilter
	for _, name := range names {
		r, ok := Rules[name]
		if !ok {
			return nil, fmt.Errorf("seccomp: unknown rule %q (have %s)", name, strings.Join(Names(), ", "))
		}
		// ld nr; jeq call; (ld arg; jeq val)*; ret errno — every jeq
		// that fails jumps past the block.
		var b []unix.SockFilter
		b = append(b, stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr), stmt(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, r.call[runtime.GOARCH]))
		for _, a := range r.args {
			// The low 32 bits of the argument (little-endian machines).
			b = append(b, stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, uint32(offArgs+8*a.i)), stmt(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, a.val))
		}
		b = append(b, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(r.errno)&unix.SECCOMP_RET_DATA))
		for i := range b {
			if b[i].Code == unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K {
				b[i].Jf = uint8(len(b) - i - 1)
			}
		}
		rules = append(rules, b)
	}
	prog := []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: arch, Jt: 1},
		allow,
	}
	for _, b := range rules {
		prog = append(prog, b...)
	}
	return append(prog, allow), nil
}

// Install sets no_new_privs and installs the filter for the named rules
// on every thread of the process (SECCOMP_FILTER_FLAG_TSYNC).
func Install(names ...string) error {
	prog, err := Program(names...)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fp))); e != 0 {
		return fmt.Errorf("seccomp: seccomp(SECCOMP_SET_MODE_FILTER): %w", e)
	}
	runtime.KeepAlive(prog)
	return nil
}
