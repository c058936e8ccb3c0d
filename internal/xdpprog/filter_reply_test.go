package xdpprog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

var (
	pfx       = netip.MustParsePrefix
	addr      = netip.MustParseAddr
	otherV4   = addr("198.19.7.1")
	otherV6   = addr("2001:db8:ffff::1")
	replyPfx4 = pfx("198.18.0.0/24")
	replyPfx6 = pfx("2001:db8::/64")
)

// replyFilters are the filters of the reply fields, each with frames that
// must and must not be redirected, IPv4 and IPv6, with and without a VLAN
// tag.
func replyFilters() []struct {
	f     *Filter
	cases []filterCase
} {
	srcPorts := &Filter{IPv4UDP: true, IPv6UDP: true, SrcPorts: []uint16{53}, SrcPortRanges: []PortRange{{33434, 33534}}}
	dstRange := &Filter{DstPortRanges: []PortRange{{1000, 1999}}, DstPorts: []uint16{7}}
	srcPfx := &Filter{SrcPrefixes: []netip.Prefix{replyPfx4, replyPfx6, pfx("198.18.77.5/32")}}
	dstPfx := &Filter{DstPrefixes: []netip.Prefix{pfx("198.18.0.2/31"), pfx("2001:db8::2/127"), pfx("::ffff:198.19.0.0/112")}}
	only4 := &Filter{SrcPrefixes: []netip.Prefix{pfx("198.18.0.0/16")}}
	vlans := &Filter{IPv4UDP: true, IPv6UDP: true, VLANs: []uint16{100, 4095}}
	etypes := &Filter{EtherTypes: []uint16{0x88b5, 0x0806}}
	etypesIP := &Filter{EtherTypes: []uint16{0x88b5}, DstPorts: []uint16{9}}
	etypesVLAN := &Filter{EtherTypes: []uint16{0x88b5}, VLANs: []uint16{7}}
	mgmt := &Filter{IPv4UDP: true, IPv4TCP: true, IPv6UDP: true, IPv6TCP: true, Management: true, EtherTypes: []uint16{0x0806, 0x88b5}, PassDst: []netip.Addr{hostV4, hostV6}}
	mgmtPorts := &Filter{Management: true, DstPortRanges: []PortRange{{0, 65535}}}
	v := func(f frame) frame { return withVIDs(f, 100) }
	return []struct {
		f     *Filter
		cases []filterCase
	}{
		{srcPorts, []filterCase{
			{"udp4 from 53", withSport(udp4(dstV4, 40000), 53), true},
			{"udp4 from 54", withSport(udp4(dstV4, 40000), 54), false},
			{"udp4 from 33434", withSport(udp4(dstV4, 1), 33434), true},
			{"udp4 from 33534", withSport(udp4(dstV4, 1), 33534), true},
			{"udp4 from 33535", withSport(udp4(dstV4, 1), 33535), false},
			{"udp4 from 33433", withSport(udp4(dstV4, 1), 33433), false},
			{"udp6 from 53", withSport(udp6(dstV6, 40000), 53), true},
			{"udp6 from 52", withSport(udp6(dstV6, 40000), 52), false},
			{"udp6 from 53 tagged", v(withSport(udp6(dstV6, 40000), 53)), true},
			{"udp4 from 53 tagged", v(withSport(udp4(dstV4, 40000), 53)), true},
			{"udp4 to 53 from 40000", udp4(dstV4, 53), false},
			{"tcp4 from 53 (tcp not selected)", withSport(tcp4(dstV4, 1), 53), false},
			{"udp4 from 53, first fragment", fragOf(withSport(udp4(dstV4, 1), 53), 0x2000), false},
		}},
		{dstRange, []filterCase{
			{"udp4 to 1000", udp4(dstV4, 1000), true},
			{"tcp6 to 1999", tcp6(dstV6, 1999), true},
			{"udp4 to 7", udp4(dstV4, 7), true},
			{"udp4 to 2000", udp4(dstV4, 2000), false},
			{"udp6 to 999 tagged", v(udp6(dstV6, 999)), false},
			{"udp6 to 1500 tagged", v(udp6(dstV6, 1500)), true},
		}},
		{srcPfx, []filterCase{
			{"udp4 from 198.18.0.1", udp4(dstV4, 9), true},
			{"tcp4 from 198.18.0.255", withSrc(tcp4(dstV4, 9), addr("198.18.0.255")), true},
			{"udp4 from 198.18.1.1", withSrc(udp4(dstV4, 9), addr("198.18.1.1")), false},
			{"udp4 from 198.18.77.5", withSrc(udp4(dstV4, 9), addr("198.18.77.5")), true},
			{"udp4 from 198.18.77.4", withSrc(udp4(dstV4, 9), addr("198.18.77.4")), false},
			{"udp4 from 198.19.7.1 tagged", v(withSrc(udp4(dstV4, 9), otherV4)), false},
			{"udp4 from 198.18.0.1 tagged", v(udp4(dstV4, 9)), true},
			{"udp6 from 2001:db8::1", udp6(dstV6, 9), true},
			{"udp6 from 2001:db8:0:0:ffff::1", withSrc(udp6(dstV6, 9), addr("2001:db8:0:0:ffff::1")), true},
			{"udp6 from 2001:db8:0:1::1", withSrc(udp6(dstV6, 9), addr("2001:db8:0:1::1")), false},
			{"tcp6 from other tagged", v(withSrc(tcp6(dstV6, 9), otherV6)), false},
			{"tcp6 from 2001:db8::1 tagged", v(tcp6(dstV6, 9)), true},
			{"arp", arp(), false},
		}},
		{dstPfx, []filterCase{
			{"udp4 to 198.18.0.2", udp4(dstV4, 9), true},
			{"udp4 to 198.18.0.3", udp4(addr("198.18.0.3"), 9), true},
			{"udp4 to 198.18.0.4", udp4(addr("198.18.0.4"), 9), false},
			{"udp4 to 198.19.3.4 (mapped prefix)", udp4(addr("198.19.3.4"), 9), true},
			{"udp4 to 198.18.5.5", udp4(addr("198.18.5.5"), 9), false},
			{"udp6 to 2001:db8::2", udp6(dstV6, 9), true},
			{"udp6 to 2001:db8::3 tagged", v(udp6(addr("2001:db8::3"), 9)), true},
			{"udp6 to 2001:db8::4", udp6(addr("2001:db8::4"), 9), false},
			{"udp6 to 2001:db8:1::2", udp6(addr("2001:db8:1::2"), 9), false},
		}},
		{only4, []filterCase{
			{"udp4 from inside", udp4(dstV4, 9), true},
			{"udp4 from outside", withSrc(udp4(dstV4, 9), addr("198.19.5.5")), false},
			{"udp6 (no IPv6 prefix)", udp6(dstV6, 9), false},
		}},
		{vlans, []filterCase{
			{"udp4 vlan 100", withVIDs(udp4(dstV4, 9), 100), true},
			{"udp6 vlan 100", withVIDs(udp6(dstV6, 9), 100), true},
			{"udp4 vlan 4095", withVIDs(udp4(dstV4, 9), 4095), true},
			{"udp4 vlan 101", withVIDs(udp4(dstV4, 9), 101), false},
			{"udp6 vlan 0", withVIDs(udp6(dstV6, 9), 0), false},
			{"udp4 untagged", udp4(dstV4, 9), false},
			{"udp6 untagged", udp6(dstV6, 9), false},
			{"udp4 vlan 100 with PCP bits", withVIDs(udp4(dstV4, 9), 0xe000|100), true},
			{"tcp4 vlan 100", withVIDs(tcp4(dstV4, 9), 100), false},
			{"udp4 802.1ad vlan 100", withVLAN(udp4(dstV4, 9), ethP8021AD), true},
		}},
		{etypes, []filterCase{
			{"0x88b5", ethFrame(0x88b5), true},
			{"0x88b5 tagged", v(ethFrame(0x88b5)), true},
			{"arp", arp(), true},
			{"0x88b6", ethFrame(0x88b6), false},
			{"udp4", udp4(dstV4, 9), false},
			{"udp6 tagged", v(udp6(dstV6, 9)), false},
		}},
		{etypesIP, []filterCase{
			{"0x88b5", ethFrame(0x88b5), true},
			{"udp4 to 9", udp4(dstV4, 9), true},
			{"tcp6 to 9 tagged", v(tcp6(dstV6, 9)), true},
			{"udp4 to 10", udp4(dstV4, 10), false},
		}},
		{etypesVLAN, []filterCase{
			{"0x88b5 vlan 7", withVIDs(ethFrame(0x88b5), 7), true},
			{"0x88b5 vlan 8", withVIDs(ethFrame(0x88b5), 8), false},
			{"0x88b5 untagged", ethFrame(0x88b5), false},
		}},
		{mgmt, []filterCase{
			{"arp (listed, kept by Management)", arp(), false},
			{"arp tagged", v(arp()), false},
			{"0x88b5", ethFrame(0x88b5), true},
			{"neighbour solicitation", neighSolicit(), false},
			{"tcp4 to 22", tcp4(dstV4, 22), false},
			{"tcp4 from 22", withSport(tcp4(dstV4, 40000), 22), false},
			{"tcp6 to 22 tagged", v(tcp6(dstV6, 22)), false},
			{"tcp6 from 22", withSport(tcp6(dstV6, 4000), 22), false},
			{"udp4 to 22", udp4(dstV4, 22), true},
			{"tcp4 to 23", tcp4(dstV4, 23), true},
			{"tcp6 to 80", tcp6(dstV6, 80), true},
			{"udp4 to the host", udp4(hostV4, 9), false},
			{"udp6 to the host tagged", v(udp6(hostV6, 9)), false},
			{"udp4 fragment", fragOf(udp4(dstV4, 9), 185), false},
		}},
		{mgmtPorts, []filterCase{
			{"tcp4 to 22", tcp4(dstV4, 22), false},
			{"udp4 to 22", udp4(dstV4, 22), true},
			{"tcp6 to 443", tcp6(dstV6, 443), true},
			{"arp", arp(), false},
		}},
	}
}

func fragOf(f frame, word uint16) frame {
	h := *f.v4
	h.fragWord = word
	f.v4 = &h
	return f
}

func TestFilterReplyFields(t *testing.T) {
	requireBPF(t)
	for _, tc := range replyFilters() {
		for _, frags := range []bool{false, true} {
			p := loadRegistered(t, &Config{Filter: tc.f, Frags: frags})
			for _, c := range tc.cases {
				name := fmt.Sprintf("%+v/frags=%v/%s", *tc.f, frags, c.name)
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

// TestFilterReplyRandom compares the program with the reference model on
// mutated and truncated frames (fixed seed), for each reply filter.
func TestFilterReplyRandom(t *testing.T) {
	requireBPF(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var frames []frame
	for _, tc := range replyFilters() {
		for _, c := range tc.cases {
			frames = append(frames, c.frame)
		}
	}
	for _, tc := range replyFilters() {
		p := loadRegistered(t, &Config{Filter: tc.f})
		redirected, runs := 0, 0
		for range 2000 {
			b := frames[rng.IntN(len(frames))].bytes()
			for range rng.IntN(3) {
				b[rng.IntN(min(len(b), 70))] ^= byte(1 << rng.IntN(8))
			}
			if rng.IntN(4) == 0 {
				b = b[:rng.IntN(len(b)+1)]
			}
			ret, ok := tryRun(t, p, b)
			if !ok {
				continue
			}
			runs++
			got := ret == retRedirect
			if got {
				redirected++
			}
			if want := refRedirect(tc.f, b); got != want {
				t.Fatalf("filter %+v: frame % x: redirect=%v, want %v", *tc.f, b, got, want)
			}
		}
		t.Logf("filter %+v: %d of %d mutated frames redirected", *tc.f, redirected, runs)
		if redirected == 0 || redirected == runs {
			t.Errorf("filter %+v: %d of %d redirected: the corpus does not tell match from no match", *tc.f, redirected, runs)
		}
	}
}

func TestFilterReplyConfigErrors(t *testing.T) {
	requireBPF(t)
	many := make([]netip.Prefix, MaxPrefixes+1)
	for i := range many {
		many[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i), 0}), 24)
	}
	for _, f := range []*Filter{
		{SrcPortRanges: []PortRange{{10, 9}}},
		{DstPortRanges: []PortRange{{2, 1}}},
		{SrcPrefixes: many},
		{DstPrefixes: []netip.Prefix{{}}},
		{VLANs: []uint16{4096}},
		{VLANs: make([]uint16, MaxVLANs+1)},
		{EtherTypes: []uint16{0x0800}},
		{EtherTypes: []uint16{0x86dd}},
		{EtherTypes: []uint16{0x8100}},
		{EtherTypes: []uint16{0x05ff}},
		{EtherTypes: make([]uint16, MaxEtherTypes+1)},
		{IPv6UDP: true, SrcPrefixes: []netip.Prefix{replyPfx4}}, // matches nothing
	} {
		p, err := Load(&Config{Filter: f})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Load(%+v): err = %v, want ErrInvalidConfig", *f, err)
		}
		if p != nil {
			p.Close()
		}
	}
	// The largest lists load (and verify).
	v6 := make([]netip.Prefix, MaxPrefixes)
	for i := range v6 {
		v6[i] = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i)}), 37+i%90)
	}
	vl := make([]uint16, MaxVLANs)
	for i := range vl {
		vl[i] = uint16(i * 50)
	}
	et := make([]uint16, MaxEtherTypes)
	for i := range et {
		et[i] = uint16(0x9000 + i)
	}
	v6[0] = pfx("198.18.0.0/16")
	p := loadRegistered(t, &Config{Filter: &Filter{SrcPrefixes: many[:MaxPrefixes], DstPrefixes: v6, VLANs: vl, EtherTypes: et,
		SrcPorts: []uint16{1}, DstPortRanges: []PortRange{{0, 65535}}, Management: true, PassDst: ownAddrs8}})
	if got := run(t, p, withVIDs(withSport(udp4(dstV4, 9), 1), 100).bytes()); got != retRedirect {
		t.Errorf("largest filter, matching frame: got %s", retName(got))
	}
}
