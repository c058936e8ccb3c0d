package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

func main() {
	dev, queue := flag.String("dev", "eth0", "interface"), flag.Int("queue", 0, "queue")
	port := flag.Uint("port", 9000, "UDP port")
	replace := flag.Bool("replace", false, "replace an XDP program attached through netlink")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := run(ctx, *dev, *queue, uint16(*port), *replace)
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
	log.Printf("program: %d datagrams redirected, %d packets passed", st.Redirected, st.Passed)
}

// Stats are the program's counters, summed over CPUs.
type Stats struct{ Redirected, Passed uint64 }

// run echoes until ctx ends; it returns the program's counters read then.
func run(ctx context.Context, dev string, queue int, port uint16, replace bool) (Stats, error) {
	spec, err := loadOwnprog()
	if err != nil {
		return Stats{}, err
	}
	if err := spec.Variables[ownprogVarPort].Set(port); err != nil {
		return Stats{}, err
	}
	var objs ownprogObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return Stats{}, err
	}
	defer objs.Close()

	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096})
	if err != nil {
		return Stats{}, err
	}
	defer u.Close()
	sock, err := xsk.New(dev, queue, u, nil)
	if err != nil {
		return Stats{}, err
	}
	defer sock.Close()
	xsks, err := xsk.UseMap(objs.Xsks) // checks that it is an XSKMAP
	if err != nil {
		return Stats{}, err
	}
	defer xsks.Close()
	if err := xsks.Register(sock); err != nil {
		return Stats{}, err
	}
	detach, err := attach(sock.Ifindex(), objs.XdpUdpPort, replace)
	if err != nil {
		return Stats{}, err
	}
	defer detach()

	s, err := txpath.New(sock, &txpath.Config{Policy: txpath.Plain}) // ReplyUDP sums
	if err != nil {
		return Stats{}, err
	}
	defer s.Close()
	p, err := rxpath.New(nil, sock)
	if err != nil {
		return Stats{}, err
	}
	defer p.Close()
	var f pkt.Frame
	err = p.Run(ctx, rxpath.HandlerFunc(func(rp *rxpath.Packet) {
		// The program already chose the port; parse to build the reply.
		if pkt.Parse(rp.Data, &f) != nil || f.Proto != pkt.ProtoUDP {
			return
		}
		if n, err := pkt.ReplyUDP(rp.Data, &f); err == nil && s.SendFrame(txpath.Options{}, rp.Data[:n]) == nil {
			_ = s.Flush() // a full ring drops the reply, as UDP may
		}
	}))
	st, serr := readStats(objs.Stats)
	return st, errors.Join(err, serr)
}

// attach attaches prog to the interface through a bpf_link, which goes
// away with the process. The kernel refuses a link on an interface that
// has a program already; then, with replace, a program attached through
// netlink is replaced through netlink in the same mode (and detached by
// the returned func), and a bpf_link's program is refused (EBUSY).
func attach(ifindex int, prog *ebpf.Program, replace bool) (detach func() error, err error) {
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
	if err == nil {
		return l.Close, nil
	}
	if !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EEXIST) {
		return nil, err
	}
	if !replace {
		return nil, fmt.Errorf("%w: the interface has an XDP program (-replace replaces one attached through netlink): %w", xsk.ErrBusy, err)
	}
	iface, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	flags := unix.XDP_FLAGS_DRV_MODE
	if x := iface.Attrs().Xdp; x != nil && x.AttachMode == nl.XDP_ATTACHED_SKB {
		flags = unix.XDP_FLAGS_SKB_MODE
	}
	if err := netlink.LinkSetXdpFdWithFlags(iface, prog.FD(), flags); err != nil {
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("%w: replace the XDP program of %s (one held by a bpf_link cannot be): %w", xsk.ErrBusy, iface.Attrs().Name, err)
		}
		return nil, fmt.Errorf("replace the XDP program of %s: %w", iface.Attrs().Name, err)
	}
	return func() error { return netlink.LinkSetXdpFdWithFlags(iface, -1, flags) }, nil
}

func readStats(m *ebpf.Map) (Stats, error) {
	var st Stats
	for key, dst := range []*uint64{&st.Redirected, &st.Passed} {
		var perCPU []uint64
		if err := m.Lookup(uint32(key), &perCPU); err != nil {
			return st, fmt.Errorf("read the program's counter %d: %w", key, err)
		}
		for _, n := range perCPU {
			*dst += n
		}
	}
	return st, nil
}
