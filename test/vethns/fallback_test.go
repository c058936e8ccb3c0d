package vethns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/internal/seccomp"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

const fallbackEnv = "XK_FALLBACK"

// TestLibraryWithoutOptionalFeatures runs the library in a child process
// whose kernel calls for XDP_MAX_TX_SKB_BUDGET, XDP_STATISTICS, the
// netdev genetlink family, XDP bpf_links and UMEM flags (TX metadata)
// fail as an older kernel's would (a seccomp filter, package internal/seccomp): a txpath Sender
// (budget 256 asked, tx-checksumming on) sends 200 datagrams over a veth
// pair to an rxpath poller behind the XDP program, every one arrives with
// a right checksum, each socket reports what it did without, and the
// program, attached through rtnetlink, is gone after Close.
func TestLibraryWithoutOptionalFeatures(t *testing.T) {
	if os.Getenv(fallbackEnv) != "" {
		if err := libraryChild(strings.Split(os.Getenv(fallbackEnv), ",")); err != nil {
			t.Fatal(err)
		}
		return
	}
	Require(t)
	a, b := NewNS(t), NewNS(t)
	p := NewPair(t, a, b, nil)
	if err := a.Do(func() error { return netdev.SetTxCsumOffload(p.A.Name, true) }); err != nil {
		t.Fatal(err)
	}
	arg := strings.Join([]string{a.Name, p.A.Name, p.A.MAC.String(), p.A.IPv4.Addr().String(),
		b.Name, p.B.Name, p.B.MAC.String(), p.B.IPv4.Addr().String()}, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLibraryWithoutOptionalFeatures$", "-test.v")
	cmd.Env = append(os.Environ(), fallbackEnv+"="+arg)
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	for _, want := range []string{
		"sender socket: copy mode, need_wakeup, no XDP_MAX_TX_SKB_BUDGET",
		"stats none",
		"device facts from ethtool",
		"decision: txpath: software",
		"program: rtnetlink",
		"UMEM with TX metadata: refused, registered without",
		"received 200 of 200, 200 good",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child does not say %q", want)
		}
	}
	err = b.Do(func() error {
		l, err := netlink.LinkByName(p.B.Name)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			return errors.New("XDP program still attached after Close")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// libraryChild is the child's side: arg is nsA, ifA, macA, addrA, nsB,
// ifB, macB, addrB.
func libraryChild(arg []string) (err error) {
	if len(arg) != 8 {
		return fmt.Errorf("bad %s: %q", fallbackEnv, arg)
	}
	if err := seccomp.Install("tx-budget", "stats", "genl", "bpf-link", "umem-flags"); err != nil {
		return err
	}
	open := func(name string) (*NS, error) {
		h, err := netns.GetFromPath(NetnsDir + "/" + name)
		if err != nil {
			return nil, err
		}
		return &NS{Name: name, h: h}, nil
	}
	nsA, err := open(arg[0])
	if err != nil {
		return err
	}
	defer nsA.h.Close()
	nsB, err := open(arg[4])
	if err != nil {
		return err
	}
	defer nsB.h.Close()
	ifA, ifB := arg[1], arg[5]
	macA, err := net.ParseMAC(arg[2])
	if err != nil {
		return err
	}
	macB, err := net.ParseMAC(arg[6])
	if err != nil {
		return err
	}
	src, dst := netip.MustParseAddr(arg[3]), netip.MustParseAddr(arg[7])

	// Receiver in B: the XDP program (no bpf_link: rtnetlink) and an
	// RX-only socket. A UMEM is registered on the socket its first
	// AF_XDP socket binds, so it is made inside the namespace too.
	var (
		uA, uB *umem.UMEM
		rx     *xsk.Socket
		prog   *xsk.Program
		facts  netdev.Info
		poller *rxpath.Poller
	)
	err = nsB.Do(func() (err error) {
		if uB, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: 1024}); err != nil {
			return err
		}
		if rx, err = xsk.New(ifB, 0, uB, &xsk.Config{NoTX: true, RXSize: 512, FillSize: 512}); err != nil {
			return err
		}
		if prog, err = xsk.AttachProgram(ifB, &xsk.ProgramConfig{Filter: &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{9000}}}); err != nil {
			return err
		}
		return prog.Register(rx)
	})
	if uB != nil {
		defer uB.Close()
	}
	if rx != nil {
		defer rx.Close()
	}
	if err != nil {
		if prog != nil {
			prog.Close()
		}
		return err
	}
	if prog.BPFLink() {
		fmt.Println("program: bpf_link")
	} else {
		fmt.Println("program: rtnetlink")
	}
	if poller, err = rxpath.New(nil, rx); err != nil {
		prog.Close()
		return err
	}
	defer poller.Close()

	// Sender in A.
	var (
		tx *xsk.Socket
		s  *txpath.Sender
	)
	err = nsA.Do(func() (err error) {
		// A UMEM with a TX metadata area is refused (no UMEM flags):
		// without one the Sender sums in software.
		if _, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 512, TxMetadataLen: umem.TxMetadataSize}); !errors.Is(err, umem.ErrNotSupported) {
			return fmt.Errorf("UMEM with TX metadata without UMEM flags: %v, want umem.ErrNotSupported", err)
		}
		fmt.Println("UMEM with TX metadata: refused, registered without")
		if uA, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: 512}); err != nil {
			return err
		}
		if tx, err = xsk.New(ifA, 0, uA, &xsk.Config{NoRX: true, MaxTXBudget: 256}); err != nil {
			return err
		}
		if facts, err = netdev.Get(ifA); err != nil {
			return err
		}
		s, err = txpath.New(tx, nil)
		return err
	})
	if uA != nil {
		defer uA.Close()
	}
	if tx != nil {
		defer tx.Close()
	}
	if err != nil {
		prog.Close()
		return err
	}
	fmt.Printf("sender socket: %s; device facts from %s\n", tx.Features(), facts.FeaturesFrom)
	fmt.Printf("receiver socket: %s\n", rx.Features())
	fmt.Printf("decision: %s\n", s.Decision())
	if _, err := tx.Stats(); !errors.Is(err, xsk.ErrNotSupported) {
		fmt.Printf("Stats without XDP_STATISTICS: %v, want ErrNotSupported\n", err)
	}

	const n = 200
	var got, good atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- poller.Run(ctx, rxpath.HandlerFunc(func(p *rxpath.Packet) {
			if v, err := csum.VerifyFrame(p.Data); err == nil && v == csum.Good {
				good.Add(1)
			}
			if got.Add(1) == n {
				cancel()
			}
		}))
	}()
	// Send once the poller has given the kernel its Fill ring's frames:
	// a packet that finds the Fill ring empty is dropped.
	for deadline := time.Now().Add(5 * time.Second); uB.Accounting().Fill < 256 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	flow, err := txpath.NewUDPFlow(macA, macB, netip.AddrPortFrom(src, 10000), netip.AddrPortFrom(dst, 9000), nil)
	if err != nil {
		prog.Close()
		return err
	}
	payload := make([]byte, 500)
	for i := range n {
		payload[0] = byte(i)
		for {
			err := s.SendUDP(flow, txpath.Options{}, payload[:16+i%400])
			if errors.Is(err, txpath.ErrRingFull) || errors.Is(err, txpath.ErrNoFrames) {
				if err := s.Wait(ctx); err != nil {
					break
				}
				continue
			}
			if err != nil {
				prog.Close()
				return err
			}
			break
		}
	}
	serr := s.Close()
	rerr := <-done
	if errors.Is(rerr, context.Canceled) {
		rerr = nil
	}
	fmt.Printf("received %d of %d, %d good\n", got.Load(), n, good.Load())
	if st, err := poller.Stats(); err == nil || errors.Is(err, xsk.ErrNotSupported) {
		fmt.Printf("poller: %+v\n", st)
	}
	perr := prog.Close()
	cerr := rx.Close()
	if _, err := poller.Reclaim(); err != nil {
		rerr = errors.Join(rerr, err)
	}
	return errors.Join(serr, rerr, perr, cerr, poller.Close())
}
