package xsk

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestFilterConversion fills every field of a Filter and checks that the
// program builder gets each one: a field added to Filter but not passed
// on fails here.
func TestFilterConversion(t *testing.T) {
	f := &Filter{IPv4UDP: true, IPv6UDP: true, IPv4TCP: true, IPv6TCP: true,
		DstPorts: []uint16{1}, PassDst: []netip.Addr{netip.MustParseAddr("198.18.0.1")},
		DstPortRanges: []PortRange{{2, 3}}, SrcPorts: []uint16{4}, SrcPortRanges: []PortRange{{5, 6}},
		SrcPrefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}, DstPrefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8::/64")},
		VLANs: []uint16{7}, EtherTypes: []uint16{0x88b5}, Management: true}
	pv, fv := reflect.ValueOf(*f.prog()), reflect.ValueOf(*f)
	if pv.NumField() != fv.NumField() {
		t.Fatalf("xsk.Filter has %d fields, the program's filter %d", fv.NumField(), pv.NumField())
	}
	for i := range fv.NumField() {
		name := fv.Type().Field(i).Name
		got := pv.FieldByName(name)
		if !got.IsValid() {
			t.Errorf("field %s is not passed on", name)
			continue
		}
		if got.IsZero() {
			t.Errorf("field %s is set but arrives zero", name)
		}
	}
	if (*Filter)(nil).prog() != nil {
		t.Error("a nil Filter must stay nil")
	}
}

// TestKeepManagement reads the addresses of a test namespace.
func TestKeepManagement(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	in := &Filter{IPv4UDP: true, DstPorts: []uint16{53}}
	var out *Filter
	if err := a.Do(func() error {
		var err error
		out, err = KeepManagement(in)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !out.Management || !out.IPv4UDP || !slices.Equal(out.DstPorts, []uint16{53}) {
		t.Errorf("KeepManagement(%+v) = %+v: lost a field or Management", *in, *out)
	}
	for _, want := range []netip.Addr{p.A.IPv4.Addr(), p.A.IPv6.Addr()} {
		if !slices.Contains(out.PassDst, want) {
			t.Errorf("PassDst %v lacks the namespace's address %v", out.PassDst, want)
		}
	}
	if slices.Contains(out.PassDst, p.B.IPv4.Addr()) {
		t.Errorf("PassDst %v holds the peer's address %v", out.PassDst, p.B.IPv4.Addr())
	}
	if in.Management || len(in.PassDst) != 0 {
		t.Errorf("KeepManagement changed its argument: %+v", *in)
	}
}
