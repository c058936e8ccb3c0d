package vethns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// TestSoftwareDevicesLeaveChecksumsPartial sends checksum-offloaded UDP
// datagrams (AF_XDP TX metadata, tx-checksumming on) out of each kind of
// software device and captures them where the device delivers them, with
// an AF_PACKET socket: every one arrives marked checksum-partial
// (TP_STATUS_CSUMNOTREADY) with the pseudo-header sum in its field, which
// is what an XDP program there would read. And txpath.ProbeDevice calls
// each such device Software, so Auto sums in software on it.
//
//	veth      the peer end
//	macvlan   a sibling macvlan (bridge mode) on the same lower device
//	bridge    a veth port's peer, the bridge device sending
//
// (netkit, ipvlan and dummy are not built into the development kernel;
// netkit and ipvlan hand skbs on the same way, by __dev_forward_skb.)
func TestSoftwareDevicesLeaveChecksumsPartial(t *testing.T) {
	Require(t)
	const n = 20
	for _, kind := range []string{"veth", "macvlan", "bridge"} {
		t.Run(kind, func(t *testing.T) {
			a, b := NewNS(t), NewNS(t)
			send, recv, dstMAC, dstIP := softDevice(t, kind, a, b)
			// macvlan takes its features from the lower device and
			// refuses the legacy ethtool call: it is on already.
			if err := a.Do(func() error { return netdev.SetTxCsumOffload(send, true) }); err != nil && !errors.Is(err, netdev.ErrNotSupported) {
				t.Fatal(err)
			}
			var dev txpath.Device
			if err := a.Do(func() (err error) { dev, err = txpath.ProbeDevice(send, false); return err }); err != nil {
				t.Fatal(err)
			}
			if !dev.Software || !dev.TxCsumOffload {
				t.Errorf("ProbeDevice(%s) = %+v, want a software device with tx-checksumming on", kind, dev)
			}
			c := startCapture(t, b, recv)
			sendOffloaded(t, a, send, dstMAC, dstIP, n)
			frames, partial, partialField, bad := c.wait(n)
			t.Logf("%s: %d frames, %d marked partial, %d with the pseudo-header sum in the field, %d bad", kind, frames, partial, partialField, bad)
			if frames != n || partial != n || partialField != n || bad != 0 {
				t.Errorf("%s: %d of %d frames, %d marked checksum-partial, %d holding the pseudo-header sum, %d bad after finishing",
					kind, frames, n, partial, partialField, bad)
			}
		})
	}
}

// softDevice builds the device of kind in a (sending) and where it
// delivers in b, and returns their names, the destination MAC and IPv4
// address to send to.
func softDevice(t *testing.T, kind string, a, b *NS) (send, recv string, dstMAC net.HardwareAddr, dstIP netip.Addr) {
	t.Helper()
	ctx := context.Background()
	ip := func(ns *NS, args ...string) {
		t.Helper()
		if out, err := ns.Exec(ctx, "ip", args...); err != nil {
			t.Fatalf("ip %v in %s: %v: %s", args, ns, err, out)
		}
	}
	mac := func(ns *NS, name string) net.HardwareAddr {
		t.Helper()
		var m net.HardwareAddr
		if err := ns.Do(func() error {
			ifi, err := net.InterfaceByName(name)
			if err == nil {
				m = ifi.HardwareAddr
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	dstIP = netip.MustParseAddr("198.18.254.2")
	switch kind {
	case "veth":
		p := NewPair(t, a, b, nil)
		return p.A.Name, p.B.Name, p.B.MAC, p.B.IPv4.Addr()
	case "macvlan":
		lower := NewPair(t, a, b, nil).A.Name // this kernel may lack dummy
		ip(a, "link", "add", "mv0", "link", lower, "type", "macvlan", "mode", "bridge")
		ip(a, "link", "add", "mv1", "link", lower, "type", "macvlan", "mode", "bridge")
		ip(a, "link", "set", "mv1", "netns", b.Name)
		ip(a, "link", "set", "mv0", "up")
		ip(b, "link", "set", "mv1", "up")
		return "mv0", "mv1", mac(b, "mv1"), dstIP
	case "bridge":
		p := NewPair(t, a, b, nil)
		ip(a, "link", "add", "br0", "type", "bridge")
		ip(a, "link", "set", p.A.Name, "master", "br0")
		ip(a, "link", "set", "br0", "up")
		return "br0", p.B.Name, p.B.MAC, p.B.IPv4.Addr()
	}
	t.Fatalf("unknown kind %s", kind)
	return
}

// sendOffloaded sends n UDP datagrams out of ifname in ns with the Offload
// policy: the checksum is requested through TX metadata.
func sendOffloaded(t *testing.T, ns *NS, ifname string, dstMAC net.HardwareAddr, dst netip.Addr, n int) {
	t.Helper()
	noMeta := false
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 256, TxMetadataLen: umem.TxMetadataSize})
		if err != nil {
			noMeta = errors.Is(err, umem.ErrNotSupported)
			return err
		}
		defer u.Close()
		sock, err := xsk.New(ifname, 0, u, &xsk.Config{NoRX: true, Mode: xsk.ModeCopy})
		if err != nil {
			return err
		}
		defer sock.Close()
		s, err := txpath.New(sock, &txpath.Config{Policy: txpath.Offload})
		if err != nil {
			return err
		}
		src := netip.MustParseAddr("198.18.254.1")
		flow, err := txpath.NewUDPFlow(ifi.HardwareAddr, dstMAC, netip.AddrPortFrom(src, 10000), netip.AddrPortFrom(dst, 9000), nil)
		if err != nil {
			s.Close()
			return err
		}
		for i := range n {
			if err := s.SendUDP(flow, txpath.Options{}, make([]byte, 100+i)); err != nil {
				s.Close()
				return err
			}
		}
		st := s.Stats()
		if err := s.Close(); err != nil {
			return err
		}
		if st.Offloaded != uint64(n) {
			return fmt.Errorf("%d of %d offloaded (%s)", st.Offloaded, n, s.Decision())
		}
		return nil
	})
	if noMeta {
		NotApplicable(t, "XDP_UMEM_TX_METADATA_LEN", "checksum offload requests need a TX metadata area: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
}

type capture struct {
	mu                                 sync.Mutex
	frames, partial, partialField, bad int
}

// startCapture opens an AF_PACKET socket with PACKET_AUXDATA on ifname in
// ns and judges every UDP datagram to port 9000: whether the kernel marks
// it checksum-partial, whether its field holds the pseudo-header sum, and
// whether it verifies once a partial one is finished as a device would.
func startCapture(t *testing.T, ns *NS, ifname string) *capture {
	t.Helper()
	fd := -1
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		proto := int(uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8)
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 50000}); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index})
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		t.Fatal(err)
	}
	c := &capture{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b, oob := make([]byte, 4096), make([]byte, 256)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, oobn, _, _, err := unix.Recvmsg(fd, b, oob, 0)
			if err == nil {
				c.judge(b[:n], oob[:oobn])
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		unix.Close(fd)
	})
	return c
}

func (c *capture) judge(f, oob []byte) {
	if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 {
		return
	}
	l4 := 14 + int(f[14]&15)*4
	if len(f) < l4+8 || binary.BigEndian.Uint16(f[l4+2:]) != 9000 {
		return
	}
	partial := false
	cmsgs, _ := unix.ParseSocketControlMessage(oob)
	for _, m := range cmsgs {
		if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= 4 {
			partial = binary.NativeEndian.Uint32(m.Data)&unix.TP_STATUS_CSUMNOTREADY != 0
		}
	}
	v, err := csum.VerifyFrame(f)
	field := holdsPseudoSum(f, l4)
	if partial {
		seg := f[l4:]
		binary.BigEndian.PutUint16(seg[6:], csum.FinishUDP(csum.Sum(seg, 0)))
		v, err = csum.VerifyFrame(f)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames++
	if partial {
		c.partial++
	}
	if field {
		c.partialField++
	}
	if err != nil || v != csum.Good {
		c.bad++
	}
}

// holdsPseudoSum reports whether the UDP checksum field of the IPv4
// frame f (its UDP header at l4) holds the pseudo-header sum, as an
// offloaded checksum leaves it. It compares the field itself: by
// csum.VerifyFrame's verdict, a datagram whose pseudo-header sum happens
// to be its right checksum too (1 in 65535) is Good, not Partial.
func holdsPseudoSum(f []byte, l4 int) bool {
	if len(f) < l4+8 {
		return false
	}
	seg := f[l4:]
	pseudo := csum.PseudoHeaderIPv4([4]byte(f[26:30]), [4]byte(f[30:34]), unix.IPPROTO_UDP, binary.BigEndian.Uint16(seg[4:]))
	got, want := binary.BigEndian.Uint16(seg[6:]), csum.Fold(pseudo)
	return got == want || got == 0 && want == 0xffff || got == 0xffff && want == 0
}

// wait waits up to 3 s for n frames.
func (c *capture) wait(n int) (frames, partial, partialField, bad int) {
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		frames, partial, partialField, bad = c.frames, c.partial, c.partialField, c.bad
		c.mu.Unlock()
		if frames >= n || time.Now().After(deadline) {
			return
		}
	}
}

// TestTapChecksums: a tap device's tx-checksumming is off until its reader
// asks for checksum offload (TUNSETOFFLOAD TUN_F_CSUM, with a virtio-net
// header); then an offloaded checksum reaches the reader unfinished,
// flagged VIRTIO_NET_HDR_F_NEEDS_CSUM, and ProbeDevice calls the tap
// Software.
func TestTapChecksums(t *testing.T) {
	Require(t)
	a := NewNS(t)
	const n = 10
	var tun int = -1
	err := a.Do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		tun = fd
		ifr, err := unix.NewIfreq("tp0")
		if err != nil {
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			return fmt.Errorf("TUNSETIFF: %w", err)
		}
		var dev txpath.Device
		if dev, err = txpath.ProbeDevice("tp0", false); err != nil {
			return err
		}
		if !dev.Software || dev.TxCsumOffload {
			t.Errorf("tap before TUNSETOFFLOAD: %+v, want software with tx-checksumming off", dev)
		}
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM); err != nil {
			return fmt.Errorf("TUNSETOFFLOAD: %w", err)
		}
		if dev, err = txpath.ProbeDevice("tp0", false); err != nil {
			return err
		}
		if !dev.Software || !dev.TxCsumOffload {
			t.Errorf("tap after TUNSETOFFLOAD: %+v, want software with tx-checksumming on", dev)
		}
		return nil
	})
	if tun >= 0 {
		defer unix.Close(tun)
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := a.Exec(context.Background(), "ip", "link", "set", "tp0", "up"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sendOffloaded(t, a, "tp0", net.HardwareAddr{2, 0, 0, 0, 0, 2}, netip.MustParseAddr("198.18.254.2"), n)
	if err := unix.SetNonblock(tun, true); err != nil {
		t.Fatal(err)
	}
	frames, needsCsum, field := 0, 0, 0
	b := make([]byte, 4096)
	for deadline := time.Now().Add(3 * time.Second); frames < n && time.Now().Before(deadline); {
		k, err := unix.Read(tun, b)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		const vnetHdr = 10 // struct virtio_net_hdr
		if k < vnetHdr+42 {
			continue
		}
		f := b[vnetHdr:k]
		if binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 {
			continue // the kernel's own IPv6 router solicitations and such
		}
		frames++
		if b[0]&1 != 0 { // VIRTIO_NET_HDR_F_NEEDS_CSUM
			needsCsum++
		}
		if holdsPseudoSum(f, 14+int(f[14]&15)*4) {
			field++
		}
	}
	t.Logf("tap: %d frames, %d flagged NEEDS_CSUM, %d with the pseudo-header sum in the field", frames, needsCsum, field)
	if frames != n || needsCsum != n || field != n {
		t.Errorf("tap reader: %d of %d frames, %d NEEDS_CSUM, %d partial", frames, n, needsCsum, field)
	}
}
