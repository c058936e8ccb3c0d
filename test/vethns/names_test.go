package vethns

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestIfNames(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range []int{1, 4242, 1<<22 - 1} {
		for _, n := range []uint32{0, 1, 35, 36, 1<<20 + 7, 36*36*36*36*36*36 - 1} {
			a, b := ifNames(p, n)
			for _, name := range []string{a, b} {
				if len(name) > maxIfName {
					t.Errorf("ifNames(%d, %d): %q is %d bytes, want <= %d", p, n, name, len(name), maxIfName)
				}
				if seen[name] {
					t.Errorf("ifNames(%d, %d): %q repeated", p, n, name)
				}
				seen[name] = true
				if !strings.HasPrefix(name, "xk") {
					t.Errorf("%q lacks the xk prefix", name)
				}
			}
		}
	}
}

func TestPairAddrs(t *testing.T) {
	v4 := netip.MustParsePrefix("198.18.0.0/15")
	v6 := netip.MustParsePrefix("2001:db8::/32")
	seen := map[netip.Addr]bool{}
	check := func(p int, n uint32) {
		a4, b4, a6, b6 := pairAddrs(p, n)
		for _, x := range []netip.Prefix{a4, b4} {
			if x.Bits() != 30 || !v4.Contains(x.Addr()) {
				t.Fatalf("pairAddrs(%d, %d): %v not a /30 in %v", p, n, x, v4)
			}
		}
		for _, x := range []netip.Prefix{a6, b6} {
			if x.Bits() != 64 || !v6.Contains(x.Addr()) {
				t.Fatalf("pairAddrs(%d, %d): %v not a /64 in %v", p, n, x, v6)
			}
		}
		if a4.Masked() != b4.Masked() || a6.Masked() != b6.Masked() {
			t.Fatalf("pairAddrs(%d, %d): ends in different subnets: %v %v %v %v", p, n, a4, b4, a6, b6)
		}
		if a4.Addr() == a4.Masked().Addr() || b4.Addr().Next() == netip.MustParseAddr("255.255.255.255") {
			t.Fatalf("pairAddrs(%d, %d): network address used: %v", p, n, a4)
		}
		for _, x := range []netip.Addr{a4.Addr(), b4.Addr(), a6.Addr(), b6.Addr()} {
			if seen[x] {
				t.Fatalf("pairAddrs(%d, %d): %v allocated twice", p, n, x)
			}
			seen[x] = true
		}
	}
	// Unique within a process for 256 pairs, and across processes whose
	// pids are close together (IPv4) or arbitrary (IPv6).
	for p := 1000; p < 1000+128; p++ {
		for n := range uint32(256) {
			check(p, n)
		}
	}
	for _, p := range []int{1 << 21, 1<<22 - 1} {
		a4, _, a6, _ := pairAddrs(p, 1)
		if !v4.Contains(a4.Addr()) || !v6.Contains(a6.Addr()) {
			t.Errorf("pid %d: %v %v out of range", p, a4, a6)
		}
	}
	// IPv6 distinguishes pids that collide in IPv4.
	_, _, x, _ := pairAddrs(5, 1)
	_, _, y, _ := pairAddrs(5+128, 1)
	if x.Masked() == y.Masked() {
		t.Errorf("pids 5 and 133 share %v", x.Masked())
	}
}

func TestTagOf(t *testing.T) {
	for in, want := range map[string]string{
		"TestTopology/pair":   "topologypair",
		"TestX":               "x",
		"Test":                "x",
		"/usr/bin/thing.test": "usrbinthingt",
		"TestÄÖÜ":             "x",
		"TestMulti_Queue#01":  "multiqueue01",
	} {
		if got := tagOf(in); got != want {
			t.Errorf("tagOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOwnerPid(t *testing.T) {
	for in, want := range map[string]int{
		"xk-123-4-topo": 123,
		"xk-9-1-x":      9,
		"xk--1-x":       0,
		"xk-abc-1-x":    0,
		"other-123-4":   0,
		"xk-123":        0,
	} {
		got, ok := ownerPid(in)
		if ok != (want != 0) || got != want {
			t.Errorf("ownerPid(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

func TestParseCounters(t *testing.T) {
	m := map[string]int64{}
	snmp := "Ip: Forwarding DefaultTTL InReceives\nIp: 2 64 17\nUdp: InDatagrams InCsumErrors\nUdp: 5 3\n"
	if err := parseSNMP([]byte(snmp), m); err != nil {
		t.Fatal(err)
	}
	snmp6 := "Ip6InReceives                   \t7\nUdp6InCsumErrors 4\nUdpLite6InDatagrams 1\nIcmp6InMsgs 2\n"
	if err := parseSNMP6([]byte(snmp6), m); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]int64{
		"Ip:InReceives": 17, "Ip:DefaultTTL": 64, "Udp:InCsumErrors": 3, "Udp:InDatagrams": 5,
		"Ip6:InReceives": 7, "Udp6:InCsumErrors": 4, "UdpLite6:InDatagrams": 1, "Icmp6:InMsgs": 2,
	} {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	if err := parseSNMP([]byte("Ip: A B\nIp: 1\n"), map[string]int64{}); err == nil {
		t.Error("mismatched snmp lines parsed without error")
	}
}

// recTB records what Require does with it.
type recTB struct {
	testing.TB
	fatal, skip string
}

func (r *recTB) Helper()           {}
func (r *recTB) Fatal(args ...any) { r.fatal = fmt.Sprint(args...) }
func (r *recTB) Skip(args ...any)  { r.skip = fmt.Sprint(args...) }

func TestRequireCI(t *testing.T) {
	errNo := errTest("no namespaces here")
	var r recTB
	require(&r, errNo, true)
	if r.fatal == "" || r.skip != "" || !strings.Contains(r.fatal, "no namespaces here") {
		t.Errorf("CI=true: fatal %q, skip %q; want a fatal naming the cause", r.fatal, r.skip)
	}
	r = recTB{}
	require(&r, errNo, false)
	if r.skip == "" || r.fatal != "" {
		t.Errorf("CI unset: fatal %q, skip %q; want a skip", r.fatal, r.skip)
	}
	r = recTB{}
	require(&r, nil, true)
	if r.skip != "" || r.fatal != "" {
		t.Errorf("no error: fatal %q, skip %q; want neither", r.fatal, r.skip)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
