package main

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/xdpkit/xdpkit/apps/internal/craft"
	"github.com/xdpkit/xdpkit/apps/internal/judge"
)

// TestRewriteIP: -pcap-rewrite-ip's incremental checksum updates leave
// UDP and TCP over IPv4 and IPv6, and ICMPv6, with the checksums gopacket
// computes for the new addresses, and ICMP (no pseudo-header) as it was.
// A packet the capture cut short (a snap length of 96 bytes, or the IP
// header and 4 bytes more) is rewritten as the bytes it kept of the whole
// one, with one or two VLAN tags too.
func TestRewriteIP(t *testing.T) {
	for _, tc := range []struct {
		mode  craft.Mode
		v6    bool
		vlans []uint16
	}{{craft.UDP, false, nil}, {craft.TCPSyn, false, nil}, {craft.ICMPEcho, false, nil}, {craft.UDP, true, nil}, {craft.TCPSyn, true, nil}, {craft.ICMPEcho, true, nil},
		{craft.UDP, false, []uint16{7}}, {craft.TCPSyn, true, []uint16{7, 8}}} {
		src, dst := netip.MustParsePrefix("198.19.7.1/32"), netip.MustParsePrefix("198.19.8.0/28")
		nsrc, ndst := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
		if tc.v6 {
			src, dst = netip.MustParsePrefix("2001:db8:7::1/128"), netip.MustParsePrefix("2001:db8:8::/120")
			nsrc, ndst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
		}
		b, err := craft.New(&craft.Config{Mode: tc.mode, VLANs: tc.vlans, Src: src, Dst: dst, SrcPorts: craft.PortRange{First: 1, Last: 9},
			DstPorts: craft.PortRange{First: 80, Last: 80}, Sizes: []int{131}, Order: craft.Random})
		if err != nil {
			t.Fatal(err)
		}
		next := net.HardwareAddr{2, 0, 0, 0, 0, 2}
		rp := &replay{ips: true, macs: true}
		copy(rp.dst[:], next)
		if tc.v6 {
			rp.src6, rp.dst6 = nsrc.As16(), ndst.As16()
		} else {
			rp.src4, rp.dst4 = nsrc.As4(), ndst.As4()
		}
		buf := make([]byte, 2048)
		for range 50 {
			n := b.Build(buf)
			l3 := 14 + 4*len(tc.vlans)
			cuts := [][]byte{append([]byte(nil), buf[:96]...), append([]byte(nil), buf[:l3+24]...)}
			if tc.v6 {
				cuts[1] = append([]byte(nil), buf[:l3+44]...)
			}
			rp.rewrite(buf[:n])
			for _, c := range cuts {
				rp.rewrite(c)
				if !bytes.Equal(c, buf[:len(c)]) {
					t.Fatalf("%v v6=%v vlans=%v cut to %d bytes:\n got %x\nwant %x", tc.mode, tc.v6, tc.vlans, len(c), c, buf[:len(c)])
				}
			}
			j, err := judge.Frame(buf[:n])
			if err != nil {
				t.Fatalf("%v v6=%v: %v", tc.mode, tc.v6, err)
			}
			if j.Src != nsrc.String() || j.Dst != ndst.String() || string(buf[0:6]) != string(next) {
				t.Fatalf("%v v6=%v: %s -> %s, dst MAC %x", tc.mode, tc.v6, j.Src, j.Dst, buf[0:6])
			}
		}
	}
}

// TestReplayEmpty: a file with nothing to send is an error, also with
// -loop 0, never an endless loop.
func TestReplayEmpty(t *testing.T) {
	f := filepath.Join(t.TempDir(), "empty.pcap")
	// A pcap header of link type 101 (raw IP) and one record.
	h := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 101, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 20, 0, 0, 0}
	h = append(h, make([]byte, 20)...)
	if err := os.WriteFile(f, h, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, loops := range []int{0, 1} {
		rp, err := openReplay(&config{pcap: f, loops: loops, pcapTiming: "rate", ifaceMAC: make(net.HardwareAddr, 6), nextMAC: make(net.HardwareAddr, 6)}, 1514)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = rp.peek()
		rp.Close()
		if !errors.Is(err, errEmpty) || rp.skipped != 1 {
			t.Errorf("-loop %d: %v, %d skipped; want errEmpty, 1 skipped", loops, err, rp.skipped)
		}
	}
}
