package xdpprog

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// XDP attach flags of IFLA_XDP (include/uapi/linux/if_link.h).
const (
	xdpFlagsUpdateIfNoExist = 1 << 0
	xdpFlagsSKBMode         = 1 << 1
	xdpFlagsDrvMode         = 1 << 2
)

// noXDPLink reports whether a failed link.AttachXDP means the kernel has
// no XDP bpf_links: cilium/ebpf's probe found
// no BPF_LINK_CREATE (before Linux 5.7), or BPF_LINK_CREATE refused the
// XDP attach type (5.7, 5.8). Any other EINVAL is the attach's own error
// and is returned as such: the probe, made once, tells the two apart.
func noXDPLink(err error) bool {
	if errors.Is(err, ebpf.ErrNotSupported) {
		return true
	}
	return errors.Is(err, unix.EINVAL) && !haveXDPLinks()
}

var xdpLinks struct {
	once sync.Once
	ok   bool
}

// haveXDPLinks probes, once per process and only when an attach failed
// with EINVAL, whether BPF_LINK_CREATE knows the XDP attach type (Linux
// 5.9). The errno alone cannot tell: a kernel with XDP
// links also answers EINVAL for a missing interface, bad flags or a
// device-bound program on another device. So the probe loads a program of
// its own (XDP_PASS, bound to no device) and asks for a native-mode link
// of it to the loopback device of a network namespace made for the probe,
// on a thread that never runs anything else: a kernel with XDP links
// finds the device and refuses native mode (EOPNOTSUPP: loopback has no
// driver XDP), one without refuses the attach type (EINVAL). Nothing
// outside that namespace is touched, and the namespace goes with the
// thread. When the probe cannot run (no CAP_SYS_ADMIN for the namespace,
// no program) it answers that links exist, and the attach's EINVAL is
// returned as it is.
func haveXDPLinks() bool {
	xdpLinks.once.Do(func() {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type:         ebpf.XDP,
			License:      "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
		})
		if err != nil {
			xdpLinks.ok = true
			return
		}
		defer prog.Close()
		done := make(chan unix.Errno, 1)
		go func() {
			// Never unlocked: the thread ends with the goroutine,
			// and its namespace with it.
			runtime.LockOSThread()
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				done <- 0 // cannot probe: keep the bpf_link error
				return
			}
			done <- linkCreateXDP(prog.FD(), 1, xdpFlagsDrvMode)
		}()
		xdpLinks.ok = <-done != unix.EINVAL
	})
	return xdpLinks.ok
}

// linkCreateXDP issues BPF_LINK_CREATE for an XDP link of progFD to
// ifindex (in the calling thread's namespace) with flags, and returns the
// errno (0: a link was made, and is closed at once, which detaches it).
func linkCreateXDP(progFD, ifindex int, flags uint32) unix.Errno {
	const bpfLinkCreate = 28 // enum bpf_cmd
	const bpfXDP = 37        // enum bpf_attach_type
	attr := struct {
		progFD, targetIfindex, attachType, flags uint32
		_                                        [16]byte
	}{progFD: uint32(progFD), targetIfindex: uint32(ifindex), attachType: bpfXDP, flags: flags}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfLinkCreate, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno == 0 {
		unix.Close(int(fd))
	}
	return errno
}

// netlinkXDP is a program attached through rtnetlink (IFLA_XDP) in the
// namespace it was attached in. Unlike a bpf_link it stays attached if
// the process dies without Close.
type netlinkXDP struct {
	ns      netns.NsHandle // the namespace of the interface
	ifindex int
	flags   int
}

// attachNetlink attaches the program fd to ifindex in the calling
// thread's namespace, failing (EBUSY) if the interface has a program.
func attachNetlink(fd, ifindex int, mode Mode) (*netlinkXDP, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("xdpprog: netlink attach: %w", err)
	}
	flags := xdpFlagsUpdateIfNoExist | xdpFlagsDrvMode
	if mode == ModeGeneric {
		flags = xdpFlagsUpdateIfNoExist | xdpFlagsSKBMode
	}
	l, err := netlink.LinkByIndex(ifindex)
	if err == nil {
		err = netlink.LinkSetXdpFdWithFlags(l, fd, flags)
	}
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("xdpprog: netlink attach %s to ifindex %d: %w", mode, ifindex, err)
	}
	return &netlinkXDP{ns: ns, ifindex: ifindex, flags: flags &^ xdpFlagsUpdateIfNoExist}, nil
}

// Close detaches the program, from a thread in the interface's namespace;
// an interface that is gone took it along.
func (n *netlinkXDP) Close() error {
	defer n.ns.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cur, err := netns.Get()
		if err != nil {
			errc <- err
			return // the thread stays locked and goes with the goroutine
		}
		defer cur.Close()
		if err := netns.Set(n.ns); err != nil {
			errc <- err
			return
		}
		err = n.detach()
		if serr := netns.Set(cur); serr != nil {
			errc <- errors.Join(err, serr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("xdpprog: netlink detach from ifindex %d: %w", n.ifindex, err)
	}
	return nil
}

func (n *netlinkXDP) detach() error {
	l, err := netlink.LinkByIndex(n.ifindex)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil
		}
		return err
	}
	return netlink.LinkSetXdpFdWithFlags(l, -1, n.flags)
}

// BPFLink reports whether the program is attached as a bpf_link (false:
// through rtnetlink, on a kernel without XDP links; or not attached).
func (p *Program) BPFLink() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, nl := p.link.(*netlinkXDP)
	return p.link != nil && !nl
}
