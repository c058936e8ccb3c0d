package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
		rp, err := openReplay(&config{pcap: f, loops: loops, pcapTiming: "rate", mtu: 1500, ifaceMAC: make(net.HardwareAddr, 6), nextMAC: make(net.HardwareAddr, 6)}, 1514)
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

// TestVLANFullMTU: a frame of the full MTU with a VLAN tag is longer than
// MTU+14 by 4 bytes; the kernel forwards no more than that, also with
// QinQ. -size takes 1518 bytes with -vlan 100 or -vlan 100,200, and a
// replay sends such frames from a file, but no byte more, and no untagged
// frame above 1514.
func TestVLANFullMTU(t *testing.T) {
	for _, tc := range []struct {
		vlans []uint16
		size  string
		ok    bool
	}{{nil, "1514", true}, {nil, "1518", false}, {[]uint16{100}, "1518", true}, {[]uint16{100}, "1519", false},
		{[]uint16{100, 200}, "1518", true}, {[]uint16{100, 200}, "1519", false}} {
		c := &config{mtu: 1500, iface: "veth0", vlans: tc.vlans, sizeS: tc.size, sizeSet: true, dstAddr: netip.MustParseAddr("198.18.0.2")}
		if err := c.parseSizes(); (err == nil) != tc.ok {
			t.Errorf("-vlan %v -size %s: %v, want ok %v", tc.vlans, tc.size, err, tc.ok)
		}
	}

	// A pcap file of frames with 0, 1 and 2 tags, each at the most the
	// MTU allows and one byte over.
	var file []byte
	file = append(file, 0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0)
	var want []int
	for tags := range 3 {
		for _, extra := range []int{0, 1} {
			n := 1514 + 4*min(tags, 1) + extra
			f := make([]byte, n)
			for k := range tags {
				binary.BigEndian.PutUint16(f[12+4*k:], []uint16{0x88a8, 0x8100}[k+2-tags])
				binary.BigEndian.PutUint16(f[14+4*k:], 100)
			}
			binary.BigEndian.PutUint16(f[12+4*tags:], 0x88b5)
			rec := make([]byte, 16)
			binary.LittleEndian.PutUint32(rec[8:], uint32(n))
			binary.LittleEndian.PutUint32(rec[12:], uint32(n))
			file = append(append(file, rec...), f...)
			if extra == 0 {
				want = append(want, n)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "mtu.pcap")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	rp, err := openReplay(&config{pcap: path, loops: 1, pcapTiming: "rate", mtu: 1500, keepMACs: true}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	var got []int
	for {
		b, _, err := rp.peek()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		got = append(got, len(b))
		rp.sent()
	}
	if !slices.Equal(got, want) || rp.skipped != 3 {
		t.Errorf("sent %v, skipped %d; want %v, 3", got, rp.skipped, want)
	}
}

// TestReplayNeverEarly: with -pcap-timing original, whatever the delays
// (a sleep that ends late, a send that stalls), no packet is let go
// before its offset in the file from the moment the first packet of its
// loop was, over two loops: the guarantee TestGenPcapTiming measures
// against. The clock is the test's own.
func TestReplayNeverEarly(t *testing.T) {
	gaps := []time.Duration{0, 2 * time.Millisecond, 20 * time.Millisecond, 150 * time.Millisecond}
	file := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}
	var fileAt []time.Duration
	at := time.Duration(1700000000 * time.Second)
	const n = 40
	for i := range n {
		rec := make([]byte, 16)
		binary.LittleEndian.PutUint32(rec[0:], uint32(at/time.Second))
		binary.LittleEndian.PutUint32(rec[4:], uint32(at%time.Second/time.Microsecond))
		binary.LittleEndian.PutUint32(rec[8:], 60)
		binary.LittleEndian.PutUint32(rec[12:], 60)
		f := make([]byte, 60)
		binary.BigEndian.PutUint16(f[12:], 0x88b5)
		file = append(append(file, rec...), f...)
		fileAt = append(fileAt, at-time.Duration(1700000000*time.Second))
		at += gaps[i%len(gaps)]
	}
	path := filepath.Join(t.TempDir(), "timed.pcap")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(20) {
		rp, err := openReplay(&config{pcap: path, loops: 2, pcapTiming: "original", mtu: 1500}, 4096)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 1))
		delay := func() time.Duration { // 0 most often, up to 30 ms
			if r.IntN(3) == 0 {
				return time.Duration(r.Int64N(int64(30 * time.Millisecond)))
			}
			return 0
		}
		now := time.Unix(1000, 0)
		var loop0 time.Time
		for i := 0; ; i++ {
			_, _, err := rp.peek()
			if err == io.EOF {
				if i != 2*n {
					t.Fatalf("seed %d: %d packets, want %d", seed, i, 2*n)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for {
				w := rp.wait(now)
				if w <= 0 {
					break
				}
				// The sender sleeps in slices of at most 100 ms and
				// may wake late.
				now = now.Add(min(w, 100*time.Millisecond) + delay())
			}
			if i%n == 0 {
				loop0 = now
			}
			if early := loop0.Add(fileAt[i%n]).Sub(now); early > 0 {
				t.Fatalf("seed %d: packet %d let go %v before its time", seed, i, early)
			}
			now = now.Add(delay()) // the send stalls
			rp.sent()
		}
		rp.Close()
	}
}

// TestRewriteIPRouted: an IPv6 datagram with a routing header that still
// has segments left carries in its UDP checksum the final destination of
// the routing header (RFC 8200 8.1), which -pcap-rewrite-ip leaves as it
// is: the checksum must stay right for the new source and that final
// destination, not for the new IPv6 destination.
func TestRewriteIPRouted(t *testing.T) {
	final := netip.MustParseAddr("2001:db8:f::9").As16()
	payload := []byte("routed datagram")
	f := make([]byte, 14+40+24+8+len(payload))
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(24+8+len(payload)))
	ip[6], ip[7] = 43, 64
	src, dst := netip.MustParseAddr("2001:db8:7::1").As16(), netip.MustParseAddr("2001:db8:8::1").As16()
	copy(ip[8:], src[:])
	copy(ip[24:], dst[:])
	rh := ip[40:]
	rh[0], rh[1], rh[2], rh[3] = 17, 2, 4, 1 // UDP next, 24 bytes, SRH, segments left 1
	copy(rh[8:], final[:])
	udp := rh[24:]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 2000)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(udp[8:], payload)
	sum := func(s, d [16]byte) uint16 { // UDP over IPv6, pseudo-header with s and d
		var acc uint32
		add := func(b []byte) {
			for i := 0; i+1 < len(b); i += 2 {
				acc += uint32(b[i])<<8 | uint32(b[i+1])
			}
			if len(b)%2 == 1 {
				acc += uint32(b[len(b)-1]) << 8
			}
		}
		add(s[:])
		add(d[:])
		var ph [8]byte
		binary.BigEndian.PutUint32(ph[0:], uint32(len(udp)))
		ph[7] = 17
		add(ph[:])
		add(udp)
		for acc>>16 != 0 {
			acc = acc&0xffff + acc>>16
		}
		return uint16(acc)
	}
	binary.BigEndian.PutUint16(udp[6:], ^sum(src, final))
	if sum(src, final) != 0xffff {
		t.Fatal("the test's own checksum is wrong")
	}
	rp := &replay{ips: true}
	rp.src6, rp.dst6 = netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8::2").As16()
	rp.rewrite(f)
	if got := sum(rp.src6, final); got != 0xffff {
		t.Fatalf("after the rewrite the UDP checksum does not hold for the new source and the final destination (sum %#04x)", got)
	}
	if string(ip[24:40]) != string(rp.dst6[:]) {
		t.Fatal("the IPv6 destination was not rewritten")
	}
}
