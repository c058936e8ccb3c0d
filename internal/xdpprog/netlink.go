package xdpprog

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
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
// no XDP bpf_links: cilium/ebpf's probe found no BPF_LINK_CREATE (before
// Linux 5.7), or BPF_LINK_CREATE refused the XDP attach type (5.7, 5.8).
func noXDPLink(err error) bool {
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EINVAL)
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
