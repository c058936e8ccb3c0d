package cli

import (
	"flag"
	"net/netip"
	"slices"
	"testing"

	"github.com/xdpkit/xdpkit/xsk"
)

func TestNICFlagsFilter(t *testing.T) {
	var f NICFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.Register(fs, true)
	if err := fs.Parse([]string{"-src-port", "53, 33434-33534", "-src-prefix", "198.18.0.0/15,2001:db8::1",
		"-dst-prefix", "198.18.0.2", "-vlan", "100,4095", "-ethertype", "0x88b5,35062", "-frame-size", "4096"}); err != nil {
		t.Fatal(err)
	}
	got, err := f.Filter(&xsk.Filter{IPv4UDP: true})
	if err != nil {
		t.Fatal(err)
	}
	want := &xsk.Filter{IPv4UDP: true, SrcPorts: []uint16{53}, SrcPortRanges: []xsk.PortRange{{First: 33434, Last: 33534}},
		SrcPrefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("2001:db8::1/128")},
		DstPrefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.2/32")}, VLANs: []uint16{100, 4095}, EtherTypes: []uint16{0x88b5, 0x88f6}}
	if !slices.Equal(got.SrcPorts, want.SrcPorts) || !slices.Equal(got.SrcPortRanges, want.SrcPortRanges) ||
		!slices.Equal(got.SrcPrefixes, want.SrcPrefixes) || !slices.Equal(got.DstPrefixes, want.DstPrefixes) ||
		!slices.Equal(got.VLANs, want.VLANs) || !slices.Equal(got.EtherTypes, want.EtherTypes) || !got.IPv4UDP {
		t.Errorf("Filter = %+v, want %+v", *got, *want)
	}
	if n, err := f.Frame("nosuch0"); n != 4096 || err != nil {
		t.Errorf("Frame = %d, %v; want 4096", n, err)
	}
	for _, args := range [][]string{{"-src-port", "70000"}, {"-src-port", "9-1"}, {"-src-prefix", "x"}, {"-vlan", "4096"}, {"-ethertype", "zz"}} {
		var g NICFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		g.Register(fs, true)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Filter(&xsk.Filter{}); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	g := NICFlags{FrameSize: 3000}
	if _, err := g.Frame("nosuch0"); err == nil {
		t.Error("-frame-size 3000 accepted")
	}
}
