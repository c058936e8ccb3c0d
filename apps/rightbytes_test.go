package apps_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// rbCount datagrams per run: fewer than veth's 256-entry XDP ring, so
// none can be dropped there however late the softirq runs.
const rbCount = 200

// rbSport and rbDport are the ports of xdpgen's one flow.
const rbSport, rbDport = 10000, 9000

type rbGen struct {
	Sent, Completed uint64
	Policy          string
	PolicyReason    string
	PolicyWarning   string
	MultiBuffer     bool // then Completed counts every buffer of a packet (the same number for each: one size)
	AccountingOK    bool
}

type rbRecv struct {
	Packets, Valid, Gaps, Lost            uint64
	BadIPCsum, BadUDPCsum, PartialUDPCsum uint64
	BadPayload, Other                     uint64
	AccountingOK                          bool
}

// rbPolicies are xdpgen's -policy values; "" runs it with default flags.
var rbPolicies = []string{"", "auto", "offload", "software", "nt", "plain"}

func rbSizes(v6 bool) string {
	if v6 {
		return "78,594,1514"
	}
	return "64,594,1514"
}

func setTxCsum(t *testing.T, l *vethns.Link, on bool) {
	t.Helper()
	if err := l.NS.Do(func() error { return netdev.SetTxCsumOffload(l.Name, on) }); err != nil {
		t.Fatal(err)
	}
}

// gen runs xdpgen in ns out of ifname to dst (through wrapper, if any)
// and returns its summary and stdout+stderr.
func gen(t *testing.T, ns *vethns.NS, ifname string, dst netip.Addr, policy string, wrapper ...string) (rbGen, string) {
	t.Helper()
	return genN(t, ns, ifname, dst, policy, rbCount, "20k", wrapper...)
}

// genN is gen with a count and a rate.
func genN(t *testing.T, ns *vethns.NS, ifname string, dst netip.Addr, policy string, count int, rate string, wrapper ...string) (rbGen, string) {
	t.Helper()
	return genSizes(t, ns, ifname, dst, policy, count, rate, rbSizes(dst.Is6()), wrapper...)
}

// genSizes is genN with xdpgen's -size list.
func genSizes(t *testing.T, ns *vethns.NS, ifname string, dst netip.Addr, policy string, count int, rate, sizes string, wrapper ...string) (rbGen, string) {
	t.Helper()
	args := []string{"-i", ifname, "-dst", dst.String(), "-count", fmt.Sprint(count), "-rate", rate,
		"-size", sizes, "-sport", fmt.Sprint(rbSport), "-dport", fmt.Sprint(rbDport), "-quiet"}
	if policy != "" {
		args = append(args, "-policy", policy)
	}
	prog := "xdpgen"
	if len(wrapper) > 0 {
		args = append(append(wrapper[1:], path("xdpgen")), args...)
		prog = wrapper[0]
	}
	stdout, stderr, code := runIn(t, ns, 60*time.Second, prog, args...)
	if code != 0 {
		t.Fatalf("xdpgen %v: exit %d: %s", args, code, stderr)
	}
	var g rbGen
	if err := cli.ParseSummary(stdout, &g); err != nil {
		t.Fatalf("xdpgen: %v: %s", err, stdout)
	}
	if g.Sent != uint64(count) || g.Completed != uint64(count) && !(g.MultiBuffer && g.Completed > g.Sent && g.Completed%g.Sent == 0) || !g.AccountingOK {
		t.Errorf("xdpgen: sent %d, completed %d of %d, accounting ok %v", g.Sent, g.Completed, count, g.AccountingOK)
	}
	return g, stdout + stderr
}

// startRecv starts xdprecv on ifname in ns (through wrapper, if any).
func startRecv(t *testing.T, ns *vethns.NS, ifname string, wrapper ...string) *topo.Proc {
	t.Helper()
	return startRecvN(t, ns, ifname, rbCount, wrapper...)
}

func startRecvN(t *testing.T, ns *vethns.NS, ifname string, count int, wrapper ...string) *topo.Proc {
	t.Helper()
	bin, args := path("xdprecv"), []string{"-i", ifname, "-count", fmt.Sprint(count), "-quiet", "-duration", "30s"}
	if len(wrapper) > 0 {
		args = append(append(wrapper[1:], bin), args...)
		bin = wrapper[0]
	}
	recv, err := topo.Start(ns, bin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Stop(5 * time.Second) })
	if err := recv.WaitReady(context.Background(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return recv
}

// recvSummary waits for xdprecv to finish (it stops at rbCount valid
// datagrams; a few seconds more at most) and returns its summary.
func recvResult(t *testing.T, recv *topo.Proc) rbRecv {
	t.Helper()
	select {
	case <-recv.Done():
	case <-time.After(5 * time.Second):
		recv.Stop(5 * time.Second)
	}
	<-recv.Done()
	var r rbRecv
	if err := cli.ParseSummary(recv.Output(), &r); err != nil {
		t.Fatalf("xdprecv: %v: %s", err, recv.Stderr())
	}
	if err := recv.Err(); err != nil {
		t.Errorf("xdprecv: %v: %s", err, recv.Stderr())
	}
	return r
}

// checkAFXDP: every datagram arrived whole and none had a bad checksum;
// partial ones only where the sender left them unfinished.
func checkAFXDP(t *testing.T, r rbRecv, wantPartial bool) {
	t.Helper()
	if r.Valid != rbCount || r.BadIPCsum+r.BadUDPCsum+r.BadPayload != 0 || !r.AccountingOK {
		t.Errorf("AF_XDP receiver: %+v", r)
	}
	// The kernel may finish a partial checksum anywhere on the path: what
	// it guarantees is a checksum that is partial or right, and
	// BadUDPCsum above counts the wrong ones.
	if got := r.PartialUDPCsum > 0; got != wantPartial {
		t.Errorf("AF_XDP receiver: %d of %d partial checksums, want partial: %v", r.PartialUDPCsum, rbCount, wantPartial)
	}
}

// kernelRecv is a kernel UDP receiver on dst:9000 in ns, with an AF_PACKET
// capture on ifname that finishes partial checksums the way a device does.
type kernelRecv struct {
	ns              *vethns.NS
	udp             *net.UDPConn
	raw             int
	csumErrs        int64
	mu              sync.Mutex
	got, frames     int
	partial, badCap int
	pseudoRight     int // frames not marked partial that verify with the pseudo-header sum in the field
	done            chan struct{}
}

func csumErrors(t *testing.T, ns *vethns.NS) int64 {
	t.Helper()
	c, err := ns.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c["Udp:InCsumErrors"] + c["Udp6:InCsumErrors"]
}

func startKernelRecv(t *testing.T, l *vethns.Link, v6 bool) *kernelRecv {
	t.Helper()
	k := &kernelRecv{ns: l.NS, raw: -1, done: make(chan struct{})}
	dst := l.AddrPort4(9000)
	if v6 {
		dst = l.AddrPort6(9000)
	}
	var err error
	if k.udp, err = l.NS.ListenUDP(dst); err != nil {
		t.Fatal(err)
	}
	// Room for every datagram of a run in both sockets, so that none is
	// dropped while the readers wait for a CPU (SO_RCVBUFFORCE: above
	// rmem_max).
	const rcvbuf = 8 << 20
	if rc, err := k.udp.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) })
	}
	err = l.NS.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		k.raw = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000}); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	k.csumErrs = csumErrors(t, l.NS)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the kernel's UDP socket
		defer wg.Done()
		b := make([]byte, 1<<16)
		for {
			k.udp.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, err := k.udp.Read(b)
			select {
			case <-k.done:
				return
			default:
			}
			if err == nil {
				k.mu.Lock()
				k.got++
				k.mu.Unlock()
			}
		}
	}()
	go func() { // the capture
		defer wg.Done()
		b, oob := make([]byte, 1<<16), make([]byte, 256) // room for jumbo frames
		for {
			n, oobn, _, _, err := unix.Recvmsg(k.raw, b, oob, 0)
			select {
			case <-k.done:
				return
			default:
			}
			if err != nil {
				continue
			}
			k.capture(b[:n], oob[:oobn])
		}
	}()
	t.Cleanup(func() {
		close(k.done)
		wg.Wait()
		k.udp.Close()
		unix.Close(k.raw)
	})
	return k
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// capture judges one frame: a frame the kernel marks checksum-partial
// (TP_STATUS_CSUMNOTREADY) is finished here as a device would (the
// segment summed from the L4 header, the checksum field as it is, and the
// complement stored), and every frame must then verify.
func (k *kernelRecv) capture(f, oob []byte) {
	l4, field, ok := udpTo9000(f)
	if !ok {
		return
	}
	partial := false
	cmsgs, _ := unix.ParseSocketControlMessage(oob)
	for _, c := range cmsgs {
		if c.Header.Level == unix.SOL_PACKET && c.Header.Type == unix.PACKET_AUXDATA && len(c.Data) >= 4 {
			partial = binary.NativeEndian.Uint32(c.Data)&unix.TP_STATUS_CSUMNOTREADY != 0
		}
	}
	if partial {
		seg := f[l4:]
		binary.BigEndian.PutUint16(seg[field:], csum.FinishUDP(csum.Sum(seg, 0)))
	}
	v, err := csum.VerifyFrame(f)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.frames++
	if partial {
		k.partial++
	}
	if err != nil || v != csum.Good && v != csum.None {
		k.badCap++
	}
	if !partial && err == nil && v == csum.Good && holdsPseudoSum(f, l4) {
		k.pseudoRight++
	}
}

// holdsPseudoSum reports whether the UDP checksum field of the frame f
// (IPv4 or IPv6, as udpTo9000 found it, its UDP header at l4) holds the
// datagram's pseudo-header sum.
func holdsPseudoSum(f []byte, l4 int) bool {
	seg := f[l4:]
	var pseudo uint32
	if binary.BigEndian.Uint16(f[12:]) == 0x86dd {
		pseudo = csum.PseudoHeaderIPv6([16]byte(f[22:38]), [16]byte(f[38:54]), unix.IPPROTO_UDP, uint32(len(seg)))
	} else {
		pseudo = csum.PseudoHeaderIPv4([4]byte(f[26:30]), [4]byte(f[30:34]), unix.IPPROTO_UDP, uint16(len(seg)))
	}
	got, want := binary.BigEndian.Uint16(seg[6:]), csum.Fold(pseudo)
	return got == want || got == 0 && want == 0xffff || got == 0xffff && want == 0
}

// checkPseudoRight checks, after checkKernel, that the frames the capture
// saw right with the pseudo-header sum in the field are the want
// datagrams that rightWhenPartial found (what xdpgen sends is what it
// builds).
func checkPseudoRight(t *testing.T, k *kernelRecv, want int) {
	t.Helper()
	k.mu.Lock()
	got := k.pseudoRight
	k.mu.Unlock()
	if got != want {
		t.Errorf("AF_PACKET capture: %d frames right with the pseudo-header sum in the field, want %d", got, want)
	}
}

// udpTo9000 finds the UDP header of a datagram to port 9000 in an
// Ethernet frame, and the checksum field's offset in it; the UDP segment
// is f[l4:] (veth frames carry no padding at these sizes).
func udpTo9000(f []byte) (l4, field int, ok bool) {
	if len(f) < 14 {
		return 0, 0, false
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		if len(f) < 34 || f[23] != 17 {
			return 0, 0, false
		}
		l4 = 14 + int(f[14]&15)*4
	case 0x86dd:
		if len(f) < 62 || f[20] != 17 {
			return 0, 0, false
		}
		l4 = 54
	default:
		return 0, 0, false
	}
	if len(f) < l4+8 || binary.BigEndian.Uint16(f[l4+2:]) != 9000 {
		return 0, 0, false
	}
	return l4, 6, true
}

// wait waits up to 5 s for n datagrams and returns what the kernel
// receiver and the capture saw.
func (k *kernelRecv) wait(t *testing.T, n int) (got, frames, partial, bad int, csumErrs int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		k.mu.Lock()
		got, frames, partial, bad = k.got, k.frames, k.partial, k.badCap
		k.mu.Unlock()
		if got >= n && frames >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got, frames, partial, bad, csumErrors(t, k.ns) - k.csumErrs
}

func checkKernel(t *testing.T, k *kernelRecv, wantPartial bool) {
	t.Helper()
	got, frames, partial, bad, errs := k.wait(t, rbCount)
	if got != rbCount || errs != 0 {
		t.Errorf("kernel receiver: %d of %d datagrams, %d InCsumErrors", got, rbCount, errs)
	}
	if frames != rbCount || bad != 0 {
		t.Errorf("AF_PACKET capture: %d of %d frames, %d bad after finishing partial ones", frames, rbCount, bad)
	}
	if (partial > 0) != wantPartial {
		t.Errorf("AF_PACKET capture: %d frames marked checksum-partial, want partial: %v", partial, wantPartial)
	}
}

// TestRightBytes sends with xdpgen over a veth pair, with default flags
// and every policy, over IPv4 and IPv6, with tx-checksumming on and off
// at the sender, to an AF_XDP receiver (xdprecv), and to a kernel UDP
// receiver with an AF_PACKET capture beside it: no receiver may see a bad
// checksum. Only an explicit offload with tx-checksumming on may leave
// checksums partial (and xdpgen must warn then): xdprecv counts them
// apart, the kernel trusts them, and the capture, told by the kernel,
// finishes them.
func TestRightBytes(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	metaErr := txMetadataErr(t)
	for _, v6 := range []bool{false, true} {
		dst := p.B.IPv4.Addr()
		fam := "ipv4"
		if v6 {
			dst, fam = p.B.IPv6.Addr(), "ipv6"
		}
		for _, txOn := range []bool{true, false} {
			setTxCsum(t, p.A, txOn)
			for _, pol := range rbPolicies {
				if pol == "plain" && v6 {
					continue // refused: UDP over IPv6 needs a checksum (TestBadFlags)
				}
				name := fmt.Sprintf("%s/tx-%v/%s", fam, map[bool]string{true: "on", false: "off"}[txOn], cmp(pol, "default"))
				unfinished := pol == "offload" && txOn
				if pol == "offload" && metaErr != nil {
					t.Run(name, func(t *testing.T) { refusedOffload(t, metaErr, a, p.A.Name, dst) })
					continue
				}
				t.Run(name+"/af_xdp", func(t *testing.T) {
					recv := startRecv(t, b, p.B.Name)
					g, out := gen(t, a, p.A.Name, dst, pol)
					checkAFXDP(t, recvResult(t, recv), unfinished)
					checkDecision(t, g, out, pol, unfinished)
				})
				t.Run(name+"/kernel", func(t *testing.T) {
					k := startKernelRecv(t, p.B, v6)
					gen(t, a, p.A.Name, dst, pol)
					checkKernel(t, k, unfinished)
				})
			}
		}
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkDecision: the default and auto policies sum in software on veth;
// an explicit offload that leaves checksums unfinished is warned about,
// in the summary and on stderr, and nothing else is.
func checkDecision(t *testing.T, g rbGen, out, pol string, unfinished bool) {
	t.Helper()
	// Auto on veth sums in software: the fused copy-and-sum, or offload
	// to a UMEM with XDP_UMEM_TX_SW_CSUM (the kernel sums while it builds
	// the skb), whichever txpath measured cheaper on this host.
	swOffload := g.Policy == "offload" && strings.Contains(g.PolicyReason, "XDP_UMEM_TX_SW_CSUM")
	if (pol == "" || pol == "auto") && g.Policy != "software" && !swOffload {
		t.Errorf("default policy on veth: %s (%s)", g.Policy, g.PolicyReason)
	}
	warned := g.PolicyWarning != "" && strings.Contains(out, "xdpgen: WARNING: ")
	if warned != unfinished || (g.PolicyWarning != "") != unfinished {
		t.Errorf("policy %q: warning %q, want one: %v", pol, g.PolicyWarning, unfinished)
	}
}

// rightWhenPartial counts the datagrams of a genSizes run from src to
// dst whose partial checksum is also their right checksum: the
// pseudo-header sum that the offload policy leaves in the field happens
// to be the complement of the whole datagram's sum. Such a datagram is
// right as it leaves the sender, nothing can tell it from a finished one
// (csum.VerifyUDP calls it Good), and xdpfwd leaves it as it is and does
// not count it as finished. Which datagrams these are (1 in 65535, by
// chance) depends on the addresses, which vethns derives from the test
// process's pid; the runs of one family send the same datagrams.
func rightWhenPartial(t *testing.T, src, dst netip.Addr, sizes string, count int) int {
	t.Helper()
	var ss []int
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("-size %q: %v", sizes, err)
		}
		ss = append(ss, n)
	}
	hdrLen := 14 + 20 + 8 // as xdpgen's flow (txpath.UDPFlow.HeaderLen)
	if dst.Is6() {
		hdrLen = 14 + 40 + 8
	}
	pat := payload.Pattern(slices.Max(ss))
	seg := make([]byte, 8+slices.Max(ss))
	right := 0
	for seq := range uint64(count) {
		n := ss[seq%uint64(len(ss))] - hdrLen // xdpgen's payload of a frame of that size
		d := seg[:8+n]
		binary.BigEndian.PutUint16(d[0:], rbSport)
		binary.BigEndian.PutUint16(d[2:], rbDport)
		binary.BigEndian.PutUint16(d[4:], uint16(len(d)))
		payload.Put(d[8:], 0, n, seq)
		copy(d[8+payload.HeaderLen:], payload.Body(pat, seq, n))
		var pseudo uint32
		if dst.Is6() {
			pseudo = csum.PseudoHeaderIPv6(src.As16(), dst.As16(), unix.IPPROTO_UDP, uint32(len(d)))
		} else {
			pseudo = csum.PseudoHeaderIPv4(src.As4(), dst.As4(), unix.IPPROTO_UDP, uint16(len(d)))
		}
		binary.BigEndian.PutUint16(d[6:], csum.Fold(pseudo))
		if csum.VerifyUDP(d, pseudo) == csum.Good {
			right++
		}
	}
	return right
}

// forwardBed builds the three-namespace topology with the given MTU,
// tx-checksumming on at the sender, and starts xdpfwd between the two
// pairs.
func forwardBed(t *testing.T, mtu int) (*topo.Topology, *topo.Proc) {
	t.Helper()
	vethns.Require(t)
	tp, err := topo.Create(&topo.Config{MTU: mtu, KeepTxCsum: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Error(err)
		}
	})
	setTxCsum(t, tp.In.A, true)
	if mtu > 1500 {
		if err := multiBufferErr(t, tp.Fwd, tp.In.B.Name); err != nil {
			refusedMultiBuffer(t, err, tp.Fwd, "-i", tp.In.B.Name, "-o", tp.Out.A.Name, "-quiet")
			return tp, nil
		}
	}
	fwd, err := topo.Start(tp.Fwd, path("xdpfwd"), nil, "-i", tp.In.B.Name, "-o", tp.Out.A.Name, "-quiet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fwd.Stop(5 * time.Second) })
	if err := fwd.WaitReady(context.Background(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return tp, fwd
}

// TestRightBytesForward: the same through xdpfwd (gen, fwd, recv), with
// tx-checksumming on at the generator: with default flags and every
// policy, no receiver sees a bad or partial checksum. An explicit offload
// reaches xdpfwd partial, and xdpfwd, whose input is a software device,
// finishes it as the kernel's forwarding path would (the receivers behind
// it are not told that it is partial).
func TestRightBytesForward(t *testing.T) {
	tp, fwd := forwardBed(t, 1500)
	metaErr := txMetadataErr(t)
	var want uint64 // partial checksums for xdpfwd to finish
	for _, v6 := range []bool{false, true} {
		src, dst, fam := tp.In.A.IPv4.Addr(), tp.Out.B.IPv4.Addr(), "ipv4"
		if v6 {
			src, dst, fam = tp.In.A.IPv6.Addr(), tp.Out.B.IPv6.Addr(), "ipv6"
		}
		same := rightWhenPartial(t, src, dst, rbSizes(v6), rbCount)
		if same > 0 {
			t.Logf("%s: %d of %d datagrams right with the pseudo-header sum in the field, which xdpfwd leaves as they are", fam, same, rbCount)
		}
		for _, pol := range rbPolicies {
			if pol == "plain" && v6 {
				continue
			}
			name := fam + "/" + cmp(pol, "default")
			if pol == "offload" && metaErr != nil {
				t.Run(name, func(t *testing.T) { refusedOffload(t, metaErr, tp.Gen, tp.In.A.Name, dst) })
				continue
			}
			t.Run(name+"/af_xdp", func(t *testing.T) {
				recv := startRecv(t, tp.Recv, tp.Out.B.Name)
				g, out := gen(t, tp.Gen, tp.In.A.Name, dst, pol)
				checkAFXDP(t, recvResult(t, recv), false) // xdpfwd finished them
				checkDecision(t, g, out, pol, pol == "offload")
			})
			t.Run(name+"/kernel", func(t *testing.T) {
				k := startKernelRecv(t, tp.Out.B, v6)
				gen(t, tp.Gen, tp.In.A.Name, dst, pol)
				checkKernel(t, k, false)
				if pol == "offload" {
					checkPseudoRight(t, k, same)
				}
			})
			if pol == "offload" {
				want += 2 * uint64(rbCount-same) // the af_xdp and the kernel run
			}
		}
	}
	if fwd.Stop(5*time.Second) != nil {
		t.Errorf("xdpfwd: %v: %s", fwd.Err(), fwd.Stderr())
	}
	// Only the offload runs (two families, two receivers) left partial
	// checksums for the forwarder to finish, less those that were right
	// already: none where the kernel has no TX metadata and xdpgen
	// refused the offload policy.
	var fs struct{ Forwarded, PartialFinished uint64 }
	if err := cli.ParseSummary(fwd.Output(), &fs); err != nil {
		t.Fatal(err)
	}
	if fs.PartialFinished != want {
		t.Errorf("xdpfwd finished %d partial checksums, want %d (forwarded %d)", fs.PartialFinished, want, fs.Forwarded)
	}
}

// TestRightBytesForwardJumbo is TestRightBytesForward for 9000-byte
// frames (MTU 9000), which reach xdpfwd as multi-buffer chains: the
// partial checksums the offload policy leaves must be finished across the
// chain, for an AF_XDP receiver and for the kernel behind the forwarder.
func TestRightBytesForwardJumbo(t *testing.T) {
	tp, fwd := forwardBed(t, 9000)
	if fwd == nil {
		return // no multi-buffer: forwardBed checked xdpfwd's refusal
	}
	// The offload policy leaves the checksums partial (all but those that
	// are right already, rightWhenPartial); without TX metadata xdpgen
	// has no offload, and the software policy sends them finished,
	// through the same chains.
	policy := "offload"
	metaErr := txMetadataErr(t)
	if metaErr != nil {
		policy = "software"
	}
	var wantPartial uint64
	for _, v6 := range []bool{false, true} {
		src, dst, fam := tp.In.A.IPv4.Addr(), tp.Out.B.IPv4.Addr(), "ipv4"
		if v6 {
			src, dst, fam = tp.In.A.IPv6.Addr(), tp.Out.B.IPv6.Addr(), "ipv6"
		}
		same := rightWhenPartial(t, src, dst, "9000", rbCount)
		if same > 0 {
			t.Logf("%s: %d of %d datagrams right with the pseudo-header sum in the field, which xdpfwd leaves as they are", fam, same, rbCount)
		}
		if metaErr == nil {
			wantPartial += 2 * uint64(rbCount-same) // the af_xdp and the kernel run
		}
		t.Run(fam+"/af_xdp", func(t *testing.T) {
			recv := startRecv(t, tp.Recv, tp.Out.B.Name)
			genSizes(t, tp.Gen, tp.In.A.Name, dst, policy, rbCount, "5k", "9000")
			checkAFXDP(t, recvResult(t, recv), false)
		})
		t.Run(fam+"/kernel", func(t *testing.T) {
			k := startKernelRecv(t, tp.Out.B, v6)
			genSizes(t, tp.Gen, tp.In.A.Name, dst, policy, rbCount, "5k", "9000")
			checkKernel(t, k, false)
			checkPseudoRight(t, k, same)
		})
	}
	if fwd.Stop(5*time.Second) != nil {
		t.Errorf("xdpfwd: %v: %s", fwd.Err(), fwd.Stderr())
	}
	var fs struct {
		Forwarded, PartialFinished uint64
		MultiBuffer                bool
	}
	if err := cli.ParseSummary(fwd.Output(), &fs); err != nil {
		t.Fatal(err)
	}
	if !fs.MultiBuffer || fs.PartialFinished != wantPartial {
		t.Errorf("xdpfwd: multi-buffer %v, finished %d partial checksums, want %d (forwarded %d)", fs.MultiBuffer, fs.PartialFinished, wantPartial, fs.Forwarded)
	}
	if metaErr != nil {
		vethns.NotApplicable(t, "XDP_UMEM_TX_METADATA_LEN", metaErr.Error()+": sent with the software policy, nothing partial to finish")
	}
}

var (
	withoutOnce sync.Once
	withoutErr  error
)

// without returns the command prefix that runs a program with the named
// kernel features taken away (internal/seccomp/without), building it once.
func without(t *testing.T, features ...string) []string {
	t.Helper()
	withoutOnce.Do(func() {
		if fileExists(path("without")) { // prebuilt (XDPKIT_APPS_BIN)
			return
		}
		gobin := "go"
		if goroot, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
			if g := filepath.Join(strings.TrimSpace(string(goroot)), "bin", "go"); fileExists(g) {
				gobin = g
			}
		}
		// A package of the xdpkit module, not of this one: build it there.
		cmd := exec.Command(gobin, "build", "-o", path("without"), "./internal/seccomp/without")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			withoutErr = fmt.Errorf("building without: %v: %s", err, out)
		}
	})
	if withoutErr != nil {
		t.Fatal(withoutErr)
	}
	return []string{path("without"), "-deny", strings.Join(features, ","), "--"}
}

// oldKernel are the features the fallback tests take away: what a kernel
// before 6.17 (XDP_MAX_TX_SKB_BUDGET), without statistics, without the
// netdev genetlink family (before 6.3), without XDP bpf_links (before
// 5.9) and without UMEM flags (TX metadata, TX_SW_CSUM: before 6.8/6.11)
// would refuse.
var oldKernel = []string{"tx-budget", "stats", "genl", "bpf-link", "umem-flags"}

// TestWithoutOptionalFeatures runs xdpgen, xdprecv and xdpfwd with the
// kernel refusing every optional feature a seccomp filter can take away:
// traffic still moves, with right checksums, and each program says what
// it did without.
func TestWithoutOptionalFeatures(t *testing.T) {
	vethns.Require(t)
	w := without(t, oldKernel...)
	t.Run("gen-recv", func(t *testing.T) {
		a, b := vethns.NewNS(t), vethns.NewNS(t)
		p := vethns.NewPair(t, a, b, nil)
		setTxCsum(t, p.A, true)
		recv := startRecv(t, b, p.B.Name, w...)
		g, out := gen(t, a, p.A.Name, p.B.IPv4.Addr(), "", w...)
		r := recvResult(t, recv)
		checkAFXDP(t, r, false)
		if g.Policy != "software" {
			t.Errorf("xdpgen policy %s (%s)", g.Policy, g.PolicyReason)
		}
		for _, want := range []string{"no XDP_MAX_TX_SKB_BUDGET", "stats none", "device facts from ethtool", "without TX metadata", "; no TX metadata;"} {
			if !strings.Contains(out, want) {
				t.Errorf("xdpgen does not say %q:\n%s", want, out)
			}
		}
		for _, want := range []string{"stats none", "attached through rtnetlink", "device facts from ethtool"} {
			if !eventually(func() bool { return strings.Contains(recv.Output(), want) }) {
				t.Errorf("xdprecv does not say %q:\n%s", want, recv.Output())
			}
		}
		if on, err := topo.XDPAttached(p.B); err != nil || on {
			t.Errorf("xdprecv left its XDP program attached (%v)", err)
		}
	})
	t.Run("forward", func(t *testing.T) {
		b := newBedAs(t, w)
		gs, rs := b.udp(t, b.t.Out.B.IPv4.Addr(), rbCount, "20k", "64,594,1514", 1)
		if gs.Sent != rbCount || rs.Valid != rbCount || rs.BadUDPCsum+rs.BadIPCsum+rs.BadPayload != 0 {
			t.Errorf("through xdpfwd without optional features: sent %d, received %+v", gs.Sent, rs)
		}
		for _, want := range []string{"no XDP_MAX_TX_SKB_BUDGET", "stats none", "attached through rtnetlink", "device facts from ethtool"} {
			if !eventually(func() bool { return strings.Count(b.fwd.Output(), want) == 2 }) {
				t.Errorf("xdpfwd does not say %q for both ports:\n%s", want, b.fwd.Output())
			}
		}
		if err := b.fwd.Stop(5 * time.Second); err != nil {
			t.Errorf("xdpfwd: %v: %s", err, b.fwd.Stderr())
		}
		for _, l := range []*vethns.Link{b.t.In.B, b.t.Out.A} {
			if on, err := topo.XDPAttached(l); err != nil || on {
				t.Errorf("xdpfwd left its XDP program on %s (%v)", l.Name, err)
			}
		}
	})
}

// TestSmallRingBudget: xdpfwd -ring 64 starts and forwards (its TX budget
// fits the ring), where XDP_MAX_TX_SKB_BUDGET 256 made the kernel answer
// EACCES, which was reported as a missing CAP_NET_ADMIN.
func TestSmallRingBudget(t *testing.T) {
	vethns.Require(t)
	tp, err := topo.Create(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	fwd, err := topo.Start(tp.Fwd, path("xdpfwd"), nil, "-i", tp.In.B.Name, "-o", tp.Out.A.Name, "-quiet", "-ring", "64", "-batch", "32")
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Stop(5 * time.Second)
	if err := fwd.WaitReady(context.Background(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// The library's Features say what the kernel took: the budget, or
	// its lack of XDP_MAX_TX_SKB_BUDGET (then copy mode sends 32 frames
	// per sendto, which fits any ring, and forwarding is what is left
	// to check).
	const noBudget = "no XDP_MAX_TX_SKB_BUDGET (kernel before 6.17)"
	eventually(func() bool {
		o := fwd.Output()
		return strings.Count(o, "TX budget 64") == 2 || strings.Count(o, noBudget) == 2
	})
	na := false
	switch out := fwd.Output(); {
	case strings.Count(out, "TX budget 64") == 2:
	case strings.Count(out, noBudget) == 2 && !strings.Contains(out, "TX budget 64"):
		na = true
	default:
		t.Errorf("xdpfwd -ring 64 says neither that it uses a TX budget of 64 nor that the kernel has none:\n%s", out)
	}
	// Fewer datagrams than the forwarder's 64-entry rings hold, slowly:
	// none can be dropped there.
	const n = 48
	recv := startRecvN(t, tp.Recv, tp.Out.B.Name, n)
	genN(t, tp.Gen, tp.In.A.Name, tp.Out.B.IPv4.Addr(), "", n, "2k")
	if r := recvResult(t, recv); r.Valid != n || r.BadIPCsum+r.BadUDPCsum+r.PartialUDPCsum+r.BadPayload != 0 {
		t.Errorf("through xdpfwd -ring 64: %+v", r)
	}
	if na {
		vethns.NotApplicable(t, "XDP_MAX_TX_SKB_BUDGET", "xdpfwd's kernel features: "+noBudget+"; forwarded with it")
	}
}

// eventually polls cond for up to 5 s (a program's lines after "ready").
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
