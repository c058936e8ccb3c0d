package xdpprog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/xdpkit/xdpkit/test/vethns"
	"golang.org/x/sys/unix"
)

const (
	retPass     = 2 // XDP_PASS
	retRedirect = 4 // XDP_REDIRECT
)

// xdpMD is struct xdp_md, the context BPF_PROG_TEST_RUN accepts.
type xdpMD struct {
	Data, DataEnd, DataMeta      uint32
	IngressIfindex, RxQueueIndex uint32
	EgressIfindex                uint32
}

// requireBPF skips (or, with CI=true, fails) when BPF programs cannot be
// loaded here.
func requireBPF(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		msg := "xdpprog: loading XDP programs needs root (CAP_BPF, CAP_NET_ADMIN)"
		if vethns.InCI() {
			tb.Fatal(msg + " [CI=true]")
		}
		tb.Skip(msg)
	}
}

// unboundXSK returns an AF_XDP socket that is neither bound nor set up.
// In the XSKMAP it makes bpf_redirect_map return XDP_REDIRECT, which is how
// the tests see the production program's decision: an empty slot gives
// XDP_PASS. (A real redirect to it fails in xsk_rcv, so attached, the
// packet is dropped.)
func unboundXSK(tb testing.TB) int {
	tb.Helper()
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("socket(AF_XDP): %v", err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	return fd
}

func load(tb testing.TB, cfg *Config) *Program {
	tb.Helper()
	p, err := Load(cfg)
	if err != nil {
		tb.Fatalf("Load: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return p
}

// loadRegistered loads cfg and registers an unbound AF_XDP socket at
// queue 0.
func loadRegistered(tb testing.TB, cfg *Config) *Program {
	tb.Helper()
	p := load(tb, cfg)
	if err := p.Register(0, unboundXSK(tb)); err != nil {
		tb.Fatalf("Register: %v", err)
	}
	return p
}

// run runs p's program once over pkt and returns its verdict.
func run(tb testing.TB, p *Program, pkt []byte) uint32 {
	tb.Helper()
	ret, ok := tryRun(tb, p, pkt)
	if !ok {
		tb.Fatalf("run %d-byte frame: the kernel refused the input", len(pkt))
	}
	return ret
}

// tryRun runs p's program once over pkt. BPF_PROG_TEST_RUN refuses
// (EINVAL) a frame whose linear part is shorter than an Ethernet header
// (14 bytes) — also when XDP metadata pads the input, as tried here — so for
// such a frame it reports ok=false; any other failure is fatal. Should a
// kernel accept short frames, they are run and checked like the others.
func tryRun(tb testing.TB, p *Program, pkt []byte) (ret uint32, ok bool) {
	tb.Helper()
	meta := 0
	if len(pkt) < ethHdrLen {
		meta = (ethHdrLen - len(pkt) + 3) &^ 3
	}
	in := append(make([]byte, meta, meta+len(pkt)), pkt...)
	ret, err := p.prog.Run(&ebpf.RunOptions{
		Data:    in,
		Context: xdpMD{Data: uint32(meta), DataEnd: uint32(len(in))},
		Repeat:  1,
	})
	if err != nil {
		if len(pkt) < ethHdrLen && errors.Is(err, unix.EINVAL) {
			return 0, false
		}
		tb.Fatalf("run %d-byte frame: %v", len(pkt), err)
	}
	return ret, true
}

func retName(r uint32) string {
	switch r {
	case retPass:
		return "XDP_PASS"
	case retRedirect:
		return "XDP_REDIRECT"
	}
	return fmt.Sprintf("ret %d", r)
}

type filterCase struct {
	name     string
	frame    frame
	redirect bool
}

// The cases below are written out by hand, independently of refRedirect,
// and also checked against it.
func TestFilterCases(t *testing.T) {
	requireBPF(t)
	udpOnly4 := &Filter{IPv4UDP: true}
	v6 := &Filter{IPv6UDP: true, IPv6TCP: true}
	ports := &Filter{IPv4UDP: true, IPv6UDP: true, IPv4TCP: true, DstPorts: []uint16{53, 4789, 4789}}
	noPorts := &Filter{IPv4UDP: true}
	pass := &Filter{PassDst: []netip.Addr{hostV4, hostV6, netip.MustParseAddr("::ffff:198.18.0.9")}}
	anyProto := &Filter{DstPorts: []uint16{7}}
	// One bound address, as xdpnet asks: the other IP version goes to
	// the kernel.
	only4 := &Filter{IPv4UDP: true, IPv6UDP: true, DstPorts: []uint16{53}, DstPrefixes: []netip.Prefix{netip.PrefixFrom(dstV4, 32)}}
	only6 := &Filter{DstPrefixes: []netip.Prefix{netip.PrefixFrom(dstV6, 128), netip.MustParsePrefix("198.18.0.9/32"), netip.PrefixFrom(hostV6, 128)},
		PassDst: []netip.Addr{hostV6}}

	frag := func(f frame, word uint16) frame {
		h := *f.v4
		h.fragWord = word
		f.v4 = &h
		return f
	}
	v4opts := func(f frame, ihl uint8) frame { h := *f.v4; h.ihl = ihl; f.v4 = &h; return f }
	badVer4 := func(f frame) frame { h := *f.v4; h.version = 6; f.v4 = &h; return f }
	hopByHop := func() frame {
		f := udp6(dstV6, 53)
		f.v6.next = 0 // hop-by-hop options, then UDP
		f.l4 = append([]byte{protoUDP, 0, 1, 4, 0, 0, 0, 0}, f.l4...)
		return f
	}

	for _, tc := range []struct {
		f     *Filter
		cases []filterCase
	}{
		{nil, []filterCase{
			{"arp", arp(), true},
			{"udp4", udp4(dstV4, 1), true},
			{"nd", neighSolicit(), true},
		}},
		{udpOnly4, []filterCase{
			{"arp", arp(), false},
			{"icmp4", icmp4(), false},
			{"udp4", udp4(dstV4, 9), true},
			{"udp4 port 0", udp4(dstV4, 0), true},
			{"tcp4", tcp4(dstV4, 9), false},
			{"udp6", udp6(dstV6, 9), false},
			{"udp4 802.1Q", withVLAN(udp4(dstV4, 9), ethP8021Q), true},
			{"udp4 802.1ad", withVLAN(udp4(dstV4, 9), ethP8021AD), true},
			{"udp4 two tags", withVLAN(udp4(dstV4, 9), ethP8021AD, ethP8021Q), false},
			{"arp 802.1Q", withVLAN(arp(), ethP8021Q), false},
			{"udp4 IHL 6", v4opts(udp4(dstV4, 9), 6), true},
			{"udp4 IHL 15", v4opts(udp4(dstV4, 9), 15), true},
			{"udp4 IHL 4", v4opts(udp4(dstV4, 9), 4), false},
			{"udp4 version 6", badVer4(udp4(dstV4, 9)), false},
			{"udp4 DF", frag(udp4(dstV4, 9), 0x4000), true},
		}},
		{noPorts, []filterCase{
			{"first fragment", frag(udp4(dstV4, 9), 0x2000), true},
			{"middle fragment", frag(udp4(dstV4, 9), 0x2000|185), true},
			{"last fragment", frag(udp4(dstV4, 9), 185), true},
			{"last fragment, no L4 header", frame{etype: ethPIPv4, v4: &ipv4Hdr{proto: protoUDP, dst: dstV4, fragWord: 185}, l4: []byte{1, 2}}, true},
			{"tcp fragment", frag(tcp4(dstV4, 9), 185), false},
		}},
		{v6, []filterCase{
			{"udp6", udp6(dstV6, 9), true},
			{"tcp6", tcp6(dstV6, 9), true},
			{"udp6 802.1Q", withVLAN(udp6(dstV6, 9), ethP8021Q), true},
			{"neighbour solicitation", neighSolicit(), false},
			{"hop-by-hop then udp", hopByHop(), false},
			{"udp4", udp4(dstV4, 9), false},
			{"arp", arp(), false},
			{"udp6 version 4", frame{etype: ethPIPv6, v6: &ipv6Hdr{version: 4, next: protoUDP, dst: dstV6}, l4: udpHdr(9)}, false},
		}},
		{ports, []filterCase{
			{"udp4 53", udp4(dstV4, 53), true},
			{"udp4 54", udp4(dstV4, 54), false},
			{"udp4 52", udp4(dstV4, 52), false},
			{"tcp4 4789", tcp4(dstV4, 4789), true},
			{"tcp6 4789 (tcp6 not selected)", tcp6(dstV6, 4789), false},
			{"udp6 4789", udp6(dstV6, 4789), true},
			{"udp6 4789 802.1Q", withVLAN(udp6(dstV6, 4789), ethP8021Q), true},
			{"udp4 0", udp4(dstV4, 0), false},
			{"udp4 65535", udp4(dstV4, 65535), false},
			{"udp4 53 first fragment", frag(udp4(dstV4, 53), 0x2000), false},
			{"udp4 53 last fragment", frag(udp4(dstV4, 53), 185), false},
			{"udp4 53 DF", frag(udp4(dstV4, 53), 0x4000), true},
			{"udp4 53 IHL 7", v4opts(udp4(dstV4, 53), 7), true},
			{"arp", arp(), false},
		}},
		{pass, []filterCase{
			{"udp4 to host", udp4(hostV4, 9), false},
			{"tcp4 to host", tcp4(hostV4, 9), false},
			{"udp4 to mapped host", udp4(netip.MustParseAddr("198.18.0.9"), 9), false},
			{"udp4 to other", udp4(dstV4, 9), true},
			{"udp4 to host+1", udp4(netip.MustParseAddr("198.18.0.7"), 9), true},
			{"udp6 to host", udp6(hostV6, 9), false},
			{"tcp6 to host", tcp6(hostV6, 9), false},
			{"udp6 to other", udp6(dstV6, 9), true},
			{"udp6 to host with last byte changed", udp6(netip.MustParseAddr("2001:db8::7"), 9), true},
			{"udp6 to host with first byte changed", udp6(netip.MustParseAddr("3001:db8::6"), 9), true},
			{"udp4 fragment to host", frag(udp4(hostV4, 9), 185), false},
			{"arp", arp(), false},
		}},
		{only4, []filterCase{
			{"udp4 53 to the address", udp4(dstV4, 53), true},
			{"udp4 54 to the address", udp4(dstV4, 54), false},
			{"udp4 53 to another address", udp4(hostV4, 53), false},
			{"udp4 53 to the subnet's broadcast", udp4(netip.MustParseAddr("198.18.0.255"), 53), false},
			{"udp4 53 802.1Q to the address", withVLAN(udp4(dstV4, 53), ethP8021Q), true},
			{"udp6 53 (no IPv6 address listed)", udp6(dstV6, 53), false},
			{"arp", arp(), false},
		}},
		{only6, []filterCase{
			{"udp6 to the address", udp6(dstV6, 9), true},
			{"tcp6 to the address", tcp6(dstV6, 9), true},
			{"udp6 to the address, last byte changed", udp6(netip.MustParseAddr("2001:db8::3"), 9), false},
			{"udp6 to the address, first byte changed", udp6(netip.MustParseAddr("3001:db8::2"), 9), false},
			{"udp6 to a listed address that PassDst has too", udp6(hostV6, 9), false},
			{"udp4 to the mapped address", udp4(netip.MustParseAddr("198.18.0.9"), 9), true},
			{"udp4 to another address", udp4(dstV4, 9), false},
			{"udp4 fragment to another address", frag(udp4(dstV4, 9), 185), false},
			{"neighbour solicitation", neighSolicit(), false},
		}},
		{anyProto, []filterCase{
			{"udp4 7", udp4(dstV4, 7), true},
			{"tcp4 7", tcp4(dstV4, 7), true},
			{"udp6 7", udp6(dstV6, 7), true},
			{"tcp6 7", tcp6(dstV6, 7), true},
			{"udp6 8", udp6(dstV6, 8), false},
		}},
	} {
		for _, frags := range []bool{false, true} {
			p := loadRegistered(t, &Config{Filter: tc.f, Frags: frags})
			for _, c := range tc.cases {
				name := fmt.Sprintf("%+v/frags=%v/%s", tc.f, frags, c.name)
				b := c.frame.bytes()
				if ref := refRedirect(tc.f, b); ref != c.redirect {
					t.Errorf("%s: reference model says redirect=%v, case says %v", name, ref, c.redirect)
				}
				want := uint32(retPass)
				if c.redirect {
					want = retRedirect
				}
				if got := run(t, p, b); got != want {
					t.Errorf("%s: got %s, want %s", name, retName(got), retName(want))
				}
			}
		}
	}
}

// differentialFilters are the filters the differential tests cover.
var differentialFilters = []*Filter{
	nil,
	{IPv4UDP: true},
	{IPv4TCP: true, IPv6TCP: true},
	{IPv6UDP: true, DstPorts: []uint16{4789}},
	{DstPorts: []uint16{0, 53, 80, 65535}, PassDst: []netip.Addr{hostV4, hostV6}},
	{IPv4UDP: true, IPv6UDP: true, PassDst: []netip.Addr{dstV4, dstV6}},
	{IPv4UDP: true, IPv6UDP: true, DstPorts: []uint16{53}, DstPrefixes: []netip.Prefix{netip.PrefixFrom(dstV4, 32)}},
	{DstPrefixes: []netip.Prefix{netip.PrefixFrom(hostV4, 32), netip.PrefixFrom(dstV6, 128), netip.PrefixFrom(hostV6, 128)}, PassDst: []netip.Addr{hostV6}},
}

func corpus() []frame {
	var fs []frame
	for _, dst4 := range []netip.Addr{dstV4, hostV4} {
		for _, port := range []uint16{0, 53, 4789, 65535} {
			fs = append(fs, udp4(dst4, port), tcp4(dst4, port),
				withVLAN(udp4(dst4, port), ethP8021Q))
		}
		f := udp4(dst4, 53)
		f.v4.ihl = 15
		fs = append(fs, f)
		f = tcp4(dst4, 53)
		f.v4.fragWord = 0x2000
		fs = append(fs, f)
	}
	for _, dst6 := range []netip.Addr{dstV6, hostV6} {
		for _, port := range []uint16{0, 53, 4789, 65535} {
			fs = append(fs, udp6(dst6, port), tcp6(dst6, port),
				withVLAN(tcp6(dst6, port), ethP8021AD))
		}
	}
	return append(fs, arp(), icmp4(), neighSolicit(), withVLAN(arp(), ethP8021Q))
}

// TestFilterTruncated cuts every corpus frame at every length 0..len and
// checks that the program agrees with the reference model, so that no
// truncated header is ever redirected (and every length runs).
func TestFilterTruncated(t *testing.T) {
	requireBPF(t)
	for i, f := range differentialFilters {
		p := loadRegistered(t, &Config{Filter: f})
		runs, refused := 0, 0
		for _, fr := range corpus() {
			b := fr.bytes()
			for n := 0; n <= len(b); n++ {
				want := refRedirect(f, b[:n])
				ret, ok := tryRun(t, p, b[:n])
				if !ok {
					refused++
					continue
				}
				got := ret == retRedirect
				runs++
				if got != want {
					t.Errorf("filter %d %+v: frame % x cut to %d bytes: redirect=%v, want %v", i, f, b, n, got, want)
				}
			}
		}
		t.Logf("filter %d: %d truncated frames agree with the reference; the kernel refused %d shorter than 14 bytes", i, runs, refused)
	}
}

// TestFilterRandom mutates corpus frames at random (fixed seed), with a bias
// towards the bytes the filter reads, and compares with the reference.
func TestFilterRandom(t *testing.T) {
	requireBPF(t)
	rng := rand.New(rand.NewPCG(1, 2))
	// Offsets that matter: ethertypes, IP version/IHL, fragment word,
	// protocol, addresses, ports (with and without a VLAN tag).
	hot := []int{12, 13, 14, 16, 17, 18, 20, 21, 22, 23, 24, 27, 30, 31, 33, 34, 36, 37, 38, 41, 54, 57, 61}
	frames := corpus()
	for i, f := range differentialFilters {
		p := loadRegistered(t, &Config{Filter: f})
		redirected := 0
		const n = 3000
		for range n {
			b := frames[rng.IntN(len(frames))].bytes()
			for range 1 + rng.IntN(3) {
				off := hot[rng.IntN(len(hot))]
				if rng.IntN(4) == 0 {
					off = rng.IntN(len(b))
				}
				if off < len(b) {
					b[off] = byte(rng.Uint32())
				}
			}
			if rng.IntN(4) == 0 {
				b = b[:rng.IntN(len(b)+1)]
			}
			want := refRedirect(f, b)
			ret, ok := tryRun(t, p, b)
			if !ok {
				continue
			}
			got := ret == retRedirect
			if got {
				redirected++
			}
			if got != want {
				t.Fatalf("filter %d %+v: frame % x: redirect=%v, want %v", i, f, b, got, want)
			}
		}
		t.Logf("filter %d: %d of %d mutated frames redirected", i, redirected, n)
	}
}

// TestNoSocketPasses checks the bpf_redirect_map fallback: with nothing in
// the XSKMAP every frame, also one the filter selects, gets XDP_PASS.
func TestNoSocketPasses(t *testing.T) {
	requireBPF(t)
	for _, f := range []*Filter{nil, {IPv4UDP: true}} {
		p := load(t, &Config{Filter: f})
		for _, fr := range []frame{udp4(dstV4, 9), arp()} {
			if got := run(t, p, fr.bytes()); got != retPass {
				t.Errorf("filter %+v, empty XSKMAP: got %s, want XDP_PASS", f, retName(got))
			}
		}
		// Register, then unregister: back to XDP_PASS.
		if err := p.Register(0, unboundXSK(t)); err != nil {
			t.Fatal(err)
		}
		if got := run(t, p, udp4(dstV4, 9).bytes()); got != retRedirect {
			t.Errorf("filter %+v, registered: got %s, want XDP_REDIRECT", f, retName(got))
		}
		if err := p.Unregister(0); err != nil {
			t.Fatal(err)
		}
		if err := p.Unregister(0); err != nil {
			t.Errorf("second Unregister: %v", err)
		}
		if got := run(t, p, udp4(dstV4, 9).bytes()); got != retPass {
			t.Errorf("filter %+v, unregistered: got %s, want XDP_PASS", f, retName(got))
		}
	}
}

func TestConfigErrors(t *testing.T) {
	requireBPF(t)
	many := make([]netip.Addr, MaxPassDst+1)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
	}
	for _, cfg := range []*Config{
		{MaxQueues: -1},
		{MaxQueues: maxMaxQueues + 1},
		{Filter: &Filter{PassDst: many}},
		{Filter: &Filter{PassDst: []netip.Addr{{}}}},
	} {
		p, err := Load(cfg)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Load(%+v): err = %v, want ErrInvalidConfig", cfg, err)
		}
		if p != nil {
			p.Close()
		}
	}
	// MaxPassDst addresses of each family load (and verify).
	many6 := make([]netip.Addr, MaxPassDst/2)
	for i := range many6 {
		many6[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 15: byte(i)})
	}
	p := load(t, &Config{Filter: &Filter{PassDst: append(many[:MaxPassDst/2], many6...)}})
	if err := p.Register(0, unboundXSK(t)); err != nil {
		t.Fatal(err)
	}
	if got := run(t, p, udp4(many[7], 1).bytes()); got != retPass {
		t.Errorf("udp to PassDst[7]: got %s", retName(got))
	}
	if got := run(t, p, udp6(many6[100], 1).bytes()); got != retPass {
		t.Errorf("udp6 to a PassDst address: got %s", retName(got))
	}
	if got := run(t, p, udp6(dstV6, 1).bytes()); got != retRedirect {
		t.Errorf("udp6 to another address: got %s", retName(got))
	}
}

func TestRegisterErrors(t *testing.T) {
	requireBPF(t)
	p := load(t, &Config{MaxQueues: 4})
	xsk := unboundXSK(t)
	for _, q := range []int{-1, 4, 1 << 20} {
		if err := p.Register(q, xsk); !errors.Is(err, ErrQueueRange) {
			t.Errorf("Register(%d): %v, want ErrQueueRange", q, err)
		}
		if err := p.Unregister(q); !errors.Is(err, ErrQueueRange) {
			t.Errorf("Unregister(%d): %v, want ErrQueueRange", q, err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	udp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(udp)
	for _, fd := range []int{int(r.Fd()), udp, -1} {
		if err := p.Register(0, fd); !errors.Is(err, ErrNotXSK) {
			t.Errorf("Register(0, fd %d): %v, want ErrNotXSK", fd, err)
		}
	}
	if err := p.Register(3, xsk); err != nil {
		t.Errorf("Register(3): %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.Register(0, xsk); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Register after Close: %v, want os.ErrClosed", err)
	}
	if err := p.Unregister(0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Unregister after Close: %v, want os.ErrClosed", err)
	}
	if _, err := p.Attach(1, ModeGeneric); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Attach after Close: %v, want os.ErrClosed", err)
	}
}

// ownAddrs8 are eight addresses of a forwarder's namespace.
var ownAddrs8 = []netip.Addr{hostV4, hostV6, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"),
	netip.MustParseAddr("198.18.9.1"), netip.MustParseAddr("2001:db8:9::1"),
	netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2")}

// BenchmarkFilter measures the program per frame with BPF_PROG_TEST_RUN
// (which adds the test-run overhead; figures are for comparison between
// filters, not absolute).
func BenchmarkFilter(b *testing.B) {
	requireBPF(b)
	for _, bc := range []struct {
		name string
		f    *Filter
		fr   frame
	}{
		{"nil", nil, udp4(dstV4, 53)},
		{"udp4", &Filter{IPv4UDP: true}, udp4(dstV4, 53)},
		{"ports-udp4", &Filter{DstPorts: []uint16{53}}, udp4(dstV4, 53)},
		{"ports+pass-udp6", &Filter{DstPorts: []uint16{53}, PassDst: []netip.Addr{hostV4, hostV6}}, udp6(dstV6, 53)},
		{"udp4-arp", &Filter{IPv4UDP: true}, arp()},
		// xdpfwd's filter: UDP and TCP over both IP versions, never to
		// the namespace's own addresses (here eight, as two veths with
		// IPv4, IPv6 and link-local addresses and loopback have).
		{"xdpfwd-udp4", &Filter{IPv4UDP: true, IPv4TCP: true, IPv6UDP: true, IPv6TCP: true, PassDst: ownAddrs8}, udp4(dstV4, 53)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := loadRegistered(b, &Config{Filter: bc.f})
			in := bc.fr.bytes()
			const repeat = 10000
			var total float64
			for b.Loop() {
				_, d, err := p.prog.Benchmark(in, repeat, nil)
				if err != nil {
					b.Fatal(err)
				}
				total += float64(d.Nanoseconds())
			}
			b.ReportMetric(total/float64(b.N), "ns/frame")
		})
	}
}
