package vethns

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named namespaces are bind-mounted, as iproute2 does.
const NetnsDir = "/run/netns"

var (
	// ErrNotRestored is returned by Do when the OS thread could not be
	// switched back to its original namespace. The thread then stays
	// locked, so the Go runtime terminates it instead of reusing it.
	ErrNotRestored = errors.New("vethns: could not restore the thread's network namespace")

	// ErrGoexit is returned by Do when f called runtime.Goexit (for
	// example t.FailNow from inside f) instead of returning.
	ErrGoexit = errors.New("vethns: function run by Do called runtime.Goexit")
)

// NS is a network namespace created for one test (or one program run).
type NS struct {
	// Name is unique, "xk-<pid>-<seq>-<tag>"; the namespace is mounted at
	// /run/netns/<Name>.
	Name string

	mu     sync.Mutex // guards h and closed
	h      netns.NsHandle
	closed bool
}

// Path is the namespace's bind mount, /run/netns/<Name>.
func (ns *NS) Path() string { return filepath.Join(NetnsDir, ns.Name) }

// String returns Name.
func (ns *NS) String() string { return ns.Name }

// NewNS creates a namespace with loopback up and deletes it in tb.Cleanup.
// It fails tb when the namespace cannot be created.
func NewNS(tb testing.TB) *NS {
	tb.Helper()
	ns, err := createNS(tagOf(tb.Name()))
	if err != nil {
		tb.Fatalf("vethns: %v", err)
	}
	tb.Cleanup(func() {
		if err := ns.Close(); err != nil {
			tb.Errorf("vethns: %v", err)
		}
	})
	return ns
}

// CreateNS is NewNS without testing, for programs and benchmarks. The
// caller must call Close.
func CreateNS() (*NS, error) {
	return createNS(tagOf(filepath.Base(os.Args[0])))
}

var (
	netnsDirOnce sync.Once
	netnsDirErr  error
)

// prepareNetnsDir makes /run/netns a shared mount point, as `ip netns add`
// does, so that namespaces mounted later also appear in mount namespaces
// created meanwhile (for example by `ip netns exec`).
func prepareNetnsDir() error {
	netnsDirOnce.Do(func() {
		if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
			netnsDirErr = err
			return
		}
		err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if errors.Is(err, unix.EINVAL) {
			// Not a mount point yet: bind it onto itself, then retry.
			if err = unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
				err = unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
			}
		}
		if err != nil {
			netnsDirErr = fmt.Errorf("make %s a shared mount: %w", NetnsDir, os.NewSyscallError("mount", err))
		}
	})
	return netnsDirErr
}

func createNS(tag string) (*NS, error) {
	return createNamedNS(fmt.Sprintf("%s%d-%d-%s", namePrefix, os.Getpid(), nextSeq(), tag))
}

func createNamedNS(name string) (_ *NS, err error) {
	if err := prepareNetnsDir(); err != nil {
		return nil, err
	}
	path := filepath.Join(NetnsDir, name)
	// O_EXCL: the name is ours alone, even against a stale leftover.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", name, err)
	}
	f.Close()
	defer func() {
		if err != nil {
			unmountAndRemove(path)
		}
	}()

	// unshare(CLONE_NEWNET) switches the calling thread, so do it on a
	// throw-away locked thread, never on the caller's.
	if err := onLockedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return os.NewSyscallError("unshare(CLONE_NEWNET)", err)
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount %s: %w", path, os.NewSyscallError("mount", err))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", name, err)
	}

	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", name, err)
	}
	ns := &NS{Name: name, h: h}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	if err := ns.setup(); err != nil {
		return nil, fmt.Errorf("set up namespace %s: %w", name, err)
	}
	return ns, nil
}

// setup brings loopback up and turns IPv6 DAD and router solicitations off
// for every interface created in the namespace later.
func (ns *NS) setup() error {
	h, err := ns.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return ns.Do(func() error {
		for _, s := range []string{
			"net/ipv6/conf/default/accept_dad",
			"net/ipv6/conf/all/accept_dad",
			"net/ipv6/conf/default/router_solicitations",
		} {
			if err := writeSysctl(s, "0"); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeSysctl writes /proc/sys/<key>. Called inside Do, net.* keys are
// those of the thread's namespace. A missing IPv6 tree (ipv6.disable=1) is
// not an error.
func writeSysctl(key, value string) error {
	err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0)
	if errors.Is(err, os.ErrNotExist) && strings.Contains(key, "ipv6") {
		return nil
	}
	return err
}

// Close deletes the namespace. Every interface in it goes too (the kernel
// destroys them asynchronously once the last reference is gone, so sockets
// still open inside keep it alive until they are closed). Close is
// idempotent and may run concurrently with Do.
func (ns *NS) Close() error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		return nil
	}
	ns.closed = true
	err := ns.h.Close()
	if rerr := unmountAndRemove(ns.Path()); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns.Name, err)
	}
	return nil
}

// unmountAndRemove undoes what createNS mounted, as `ip netns del` does.
func unmountAndRemove(path string) error {
	var errs []error
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, os.NewSyscallError("umount2 "+path, err))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// handle returns a duplicate of the namespace fd, so that Close can run
// while it is in use; call the returned release when done with it.
func (ns *NS) handle() (netns.NsHandle, func(), error) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		return -1, nil, fmt.Errorf("namespace %s: %w", ns.Name, os.ErrClosed)
	}
	fd, err := unix.FcntlInt(uintptr(ns.h), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("namespace %s: %w", ns.Name, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err))
	}
	h := netns.NsHandle(fd)
	return h, func() { h.Close() }, nil
}

// netlinkHandle opens a rtnetlink handle whose socket lives in ns.
//
// It is opened inside Do rather than with netlink.NewHandleAt: NewHandleAt
// switches the calling goroutine's own thread into ns and back, and
// unlocks the thread even when switching back failed, which would leave a
// thread in the wrong namespace to run arbitrary goroutines.
func (ns *NS) netlinkHandle() (*netlink.Handle, error) {
	var nh *netlink.Handle
	err := ns.Do(func() error {
		var err error
		nh, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", ns.Name, err)
	}
	return nh, nil
}

// Do runs f on a fresh goroutine locked to its OS thread that has been
// switched into ns, and waits for it. The caller's own thread is never
// switched. If the thread cannot be switched back, Do returns an error
// matching ErrNotRestored and leaves the thread locked, so the runtime
// terminates it rather than run other goroutines in ns. Sockets created
// inside f stay in ns.
//
// This follows cilium/ebpf's NetNS.Do.
func (ns *NS) Do(f func() error) error {
	h, release, err := ns.handle()
	if err != nil {
		return err
	}
	defer release()
	return onLockedThread(func() error {
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter namespace %s: %w", ns.Name, err)
		}
		return f()
	})
}

// onLockedThread runs f on a new goroutine locked to its thread, then puts
// the thread back into the namespace it started in. f may change the
// thread's network namespace (setns or unshare).
func onLockedThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		err := ErrGoexit // replaced unless f calls runtime.Goexit
		defer func() { done <- err }()

		runtime.LockOSThread()
		orig, oerr := netns.Get()
		if oerr != nil {
			runtime.UnlockOSThread() // not switched yet: the thread is clean
			err = fmt.Errorf("open the thread's namespace: %w", oerr)
			return
		}
		defer func() {
			serr := netns.Set(orig)
			orig.Close()
			if serr != nil {
				// Stay locked: the runtime kills a thread whose
				// goroutine exits while locked.
				err = errors.Join(err, fmt.Errorf("%w: %w", ErrNotRestored, serr))
				return
			}
			runtime.UnlockOSThread()
		}()
		err = f()
	}()
	return <-done
}

// Exec runs a command inside ns, like `ip netns exec NAME name args...`,
// and returns its combined output. It needs iproute2's ip on PATH; inside
// the command /sys shows ns's interfaces.
func (ns *NS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	_, release, err := ns.handle()
	if err != nil {
		return nil, err
	}
	defer release()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("in %s: %s %s: %w: %s", ns.Name, name, strings.Join(args, " "),
			err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Counters reads /proc/thread-self/net/snmp, snmp6 and netstat from inside
// ns, keyed "<group>:<name>": "Udp:InCsumErrors", "Tcp:InCsumErrors",
// "Udp6:InCsumErrors", "Ip:InReceives", "TcpExt:TCPTimeouts", ...
func (ns *NS) Counters() (map[string]int64, error) {
	m := make(map[string]int64, 256)
	err := ns.Do(func() error {
		for _, name := range []string{"snmp", "netstat"} {
			b, err := os.ReadFile("/proc/thread-self/net/" + name)
			if err != nil {
				return err
			}
			if err := parseSNMP(b, m); err != nil {
				return fmt.Errorf("parse %s: %w", name, err)
			}
		}
		b, err := os.ReadFile("/proc/thread-self/net/snmp6")
		if errors.Is(err, os.ErrNotExist) {
			return nil // IPv6 disabled
		}
		if err != nil {
			return err
		}
		return parseSNMP6(b, m)
	})
	if err != nil {
		return nil, fmt.Errorf("counters of %s: %w", ns.Name, err)
	}
	return m, nil
}

// parseSNMP parses the header/value line pairs of /proc/net/snmp and
// /proc/net/netstat ("Udp: InDatagrams NoPorts ..." then "Udp: 1 2 ...").
func parseSNMP(b []byte, m map[string]int64) error {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines)%2 != 0 {
		return fmt.Errorf("odd number of lines (%d)", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		keys, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(keys) != len(vals) || len(keys) == 0 || keys[0] != vals[0] || !strings.HasSuffix(keys[0], ":") {
			return fmt.Errorf("mismatched lines %q and %q", lines[i], lines[i+1])
		}
		group := keys[0]
		for j := 1; j < len(keys); j++ {
			v, err := strconv.ParseInt(vals[j], 10, 64)
			if err != nil {
				return fmt.Errorf("%s%s: %w", group, keys[j], err)
			}
			m[group+keys[j]] = v
		}
	}
	return nil
}

// snmp6Groups are the prefixes of /proc/net/snmp6 names, longest first.
var snmp6Groups = []string{"UdpLite6", "Icmp6", "Udp6", "Ip6"}

// parseSNMP6 parses "Udp6InDatagrams 12" lines into "Udp6:InDatagrams".
func parseSNMP6(b []byte, m map[string]int64) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return fmt.Errorf("snmp6 %s: %w", f[0], err)
		}
		key := f[0]
		for _, g := range snmp6Groups {
			if strings.HasPrefix(key, g) {
				key = g + ":" + key[len(g):]
				break
			}
		}
		m[key] = v
	}
	return sc.Err()
}

// ListenUDP opens a UDP socket inside ns bound to addr.
func (ns *NS) ListenUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.Do(func() error {
		var err error
		c, err = net.ListenUDP(udpNet(addr.Addr()), net.UDPAddrFromAddrPort(addr))
		return err
	})
	return c, err
}

// DialUDP opens a UDP socket inside ns connected to raddr. An invalid
// (zero) laddr lets the kernel choose the local address and port.
func (ns *NS) DialUDP(laddr, raddr netip.AddrPort) (*net.UDPConn, error) {
	var la *net.UDPAddr
	if laddr.IsValid() {
		la = net.UDPAddrFromAddrPort(laddr)
	}
	var c *net.UDPConn
	err := ns.Do(func() error {
		var err error
		c, err = net.DialUDP(udpNet(raddr.Addr()), la, net.UDPAddrFromAddrPort(raddr))
		return err
	})
	return c, err
}

func udpNet(a netip.Addr) string {
	if a.Is4() || a.Is4In6() {
		return "udp4"
	}
	if a.Is6() {
		return "udp6"
	}
	return "udp"
}
