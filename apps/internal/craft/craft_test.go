package craft_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/xdpkit/xdpkit/apps/internal/craft"
	"github.com/xdpkit/xdpkit/apps/internal/judge"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
)

var (
	macA = [6]byte{2, 0, 0, 0, 0, 1}
	macB = [6]byte{2, 0, 0, 0, 0, 2}
)

func cfg(mode craft.Mode, v6 bool, vlans []uint16) *craft.Config {
	c := &craft.Config{Mode: mode, SrcMAC: macA, DstMAC: macB, VLANs: vlans, EtherType: 0x88b5,
		SrcPorts: craft.PortRange{First: 10000, Last: 10002}, DstPorts: craft.PortRange{First: 80, Last: 81},
		Sizes: []int{128, 200}}
	if v6 {
		c.Src, c.Dst = netip.MustParsePrefix("2001:db8::1/128"), netip.MustParsePrefix("2001:db8:1::/126")
	} else {
		c.Src, c.Dst = netip.MustParsePrefix("198.18.0.1/32"), netip.MustParsePrefix("198.19.0.0/30")
	}
	return c
}

// TestFrames: every mode over IPv4 and IPv6 with 0, 1 and 2 VLAN tags
// decodes with gopacket, with its checksums as gopacket computes them and
// the fields the config asks for, VLAN tags with their TPIDs.
func TestFrames(t *testing.T) {
	for _, mode := range []craft.Mode{craft.UDP, craft.TCPSyn, craft.ICMPEcho, craft.Raw} {
		for _, v6 := range []bool{false, true} {
			for _, vl := range [][]uint16{nil, {100}, {100, 200}} {
				t.Run(fmt.Sprintf("%v/v6=%v/vlan=%v", mode, v6, vl), func(t *testing.T) {
					b, err := craft.New(cfg(mode, v6, vl))
					if err != nil {
						t.Fatal(err)
					}
					buf := make([]byte, b.MaxLen())
					seen := map[[2]uint16]bool{}
					dsts := map[string]bool{}
					for i := range 48 {
						n := b.Build(buf)
						j, err := judge.Frame(buf[:n])
						if err != nil {
							t.Fatalf("frame %d: %v", i, err)
						}
						if !equalU16(j.VLANs, vl) || !equalU16(j.TPIDs, wantTPIDs[len(vl)]) {
							t.Fatalf("frame %d: VLANs %v TPIDs %#04x, want %v %#04x", i, j.VLANs, j.TPIDs, vl, wantTPIDs[len(vl)])
						}
						if mode == craft.Raw {
							if j.EtherType != 0x88b5 || buf[n-1] != byte(n-1-14-4*len(vl)) {
								t.Fatalf("raw frame %d: EtherType %v, last byte %d", i, j.EtherType, buf[n-1])
							}
							continue
						}
						dsts[j.Dst] = true
						switch mode {
						case craft.UDP:
							h, ok := payload.Parse(j.Payload)
							if !ok || h.Seq != uint64(i) || !payload.Check(payload.Pattern(2048), j.Payload, h) {
								t.Fatalf("UDP frame %d: payload %+v %v", i, h, ok)
							}
							seen[[2]uint16{j.SPort, j.DPort}] = true
						case craft.TCPSyn:
							tcp := j.TCP
							if !tcp.SYN || tcp.ACK || len(tcp.Options) != 5 || n != map[bool]int{false: 74, true: 94}[v6]+4*len(vl) {
								t.Fatalf("SYN %d: %d bytes, options %v", i, n, tcp.Options)
							}
							want := []layers.TCPOptionKind{layers.TCPOptionKindMSS, layers.TCPOptionKindSACKPermitted,
								layers.TCPOptionKindTimestamps, layers.TCPOptionKindNop, layers.TCPOptionKindWindowScale}
							for k, o := range tcp.Options {
								if o.OptionType != want[k] {
									t.Fatalf("SYN %d: option %d is %v, want %v", i, k, o.OptionType, want[k])
								}
							}
							seen[[2]uint16{j.SPort, j.DPort}] = true
						case craft.ICMPEcho:
							if wantT := map[bool]uint8{false: 8, true: 128}[v6]; j.ICMPType != wantT || j.ICMPSeq != uint16(i) {
								t.Fatalf("echo %d: type %d seq %d", i, j.ICMPType, j.ICMPSeq)
							}
							seen[[2]uint16{j.ICMPID, 0}] = true
						}
					}
					if mode == craft.Raw {
						return
					}
					// Sequential: 3 source ports x 2 destination ports
					// (ICMP: 3 identifiers) x 4 destinations in 48 frames.
					wantSeen := 6
					if mode == craft.ICMPEcho {
						wantSeen = 3
					}
					if len(seen) != wantSeen || len(dsts) != 4 {
						t.Errorf("%d port pairs, %d destinations in 48 frames; want %d and 4", len(seen), len(dsts), wantSeen)
					}
				})
			}
		}
	}
}

// wantTPIDs are the TPIDs of 0, 1 and 2 tags: 802.1Q, and 802.1ad QinQ
// (S-tag outside, C-tag inside).
var wantTPIDs = [][]uint16{nil, {0x8100}, {0x88a8, 0x8100}}

func equalU16(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSequentialOrder: the odometer turns the source port fastest, then
// the destination port, the source and the destination address.
func TestSequentialOrder(t *testing.T) {
	c := cfg(craft.UDP, false, nil)
	b, err := craft.New(c)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, b.MaxLen())
	for i := range 30 {
		n := b.Build(buf)
		ip, udp := buf[14:34], buf[34:n]
		sp, dp := binary.BigEndian.Uint16(udp), binary.BigEndian.Uint16(udp[2:])
		dst := binary.BigEndian.Uint32(ip[16:]) - binary.BigEndian.Uint32([]byte{198, 19, 0, 0})
		if sp != 10000+uint16(i%3) || dp != 80+uint16(i/3%2) || dst != uint32(i/6%4) {
			t.Fatalf("frame %d: sport %d dport %d dst +%d", i, sp, dp, dst)
		}
	}
}

// TestRandomSeed: a random order is the same for one seed, different for
// another, and stays in its ranges.
func TestRandomSeed(t *testing.T) {
	run := func(seed uint64) [][]byte {
		c := cfg(craft.TCPSyn, false, nil)
		c.Order, c.Seed = craft.Random, seed
		c.DstPorts = craft.PortRange{First: 1, Last: 65535}
		b, err := craft.New(c)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for range 100 {
			buf := make([]byte, b.MaxLen())
			n := b.Build(buf)
			sp := binary.BigEndian.Uint16(buf[34:])
			dst := buf[33]
			if sp < 10000 || sp > 10002 || dst > 3 {
				t.Fatalf("out of range: sport %d, dst last byte %d", sp, dst)
			}
			out = append(out, buf[:n])
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	same, diff := true, 0
	for i := range a {
		same = same && bytes.Equal(a[i], b[i])
		if !bytes.Equal(a[i], c[i]) {
			diff++
		}
	}
	if !same || diff < 90 {
		t.Errorf("seed 1 twice equal: %v; seeds 1 and 2 differ in %d of 100 frames", same, diff)
	}
}

func TestParse(t *testing.T) {
	if r, err := craft.ParsePortRange("10-20"); err != nil || r != (craft.PortRange{First: 10, Last: 20}) {
		t.Errorf("10-20: %v %v", r, err)
	}
	for _, bad := range []string{"0", "20-10", "x", "1-70000"} {
		if _, err := craft.ParsePortRange(bad); !errors.Is(err, craft.ErrConfig) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if p, a, err := craft.ParsePrefix("198.18.1.7/24"); err != nil || p.String() != "198.18.1.0/24" || a.String() != "198.18.1.7" {
		t.Errorf("prefix: %v %v %v", p, a, err)
	}
	if v, err := craft.ParseVLANs("100,200"); err != nil || len(v) != 2 {
		t.Errorf("vlans: %v %v", v, err)
	}
	if _, err := craft.ParseVLANs("1,2,3"); err == nil {
		t.Errorf("three VLAN tags accepted")
	}
}

// BenchmarkBuild is each mode's cost per frame (64-byte frames, 74/94 for
// SYNs), with allocations reported: none.
func BenchmarkBuild(b *testing.B) {
	for _, mode := range []craft.Mode{craft.UDP, craft.TCPSyn, craft.ICMPEcho, craft.Raw} {
		for _, v6 := range []bool{false, true} {
			b.Run(fmt.Sprintf("%v/v6=%v", mode, v6), func(b *testing.B) {
				c := cfg(mode, v6, nil)
				c.Sizes = []int{64}
				if v6 {
					c.Sizes = []int{78}
				}
				c.Order = craft.Random
				bd, err := craft.New(c)
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, 2048)
				b.ReportAllocs()
				for b.Loop() {
					bd.Build(buf)
				}
			})
		}
	}
}

func TestNoAllocs(t *testing.T) {
	for _, mode := range []craft.Mode{craft.UDP, craft.TCPSyn, craft.ICMPEcho, craft.Raw} {
		b, err := craft.New(cfg(mode, true, []uint16{1, 2}))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, b.MaxLen())
		if n := testing.AllocsPerRun(100, func() { b.Build(buf) }); n != 0 {
			t.Errorf("%v: %v allocations per frame", mode, n)
		}
	}
}

// TestStride: three Builders with Start 0, 1, 2 and Stride 3 make every
// combination of a sequential walk once between them.
func TestStride(t *testing.T) {
	seen := map[[3]uint32]int{}
	for start := range 3 {
		c := cfg(craft.UDP, false, nil)
		c.Start, c.Stride = start, 3
		b, err := craft.New(c)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, b.MaxLen())
		for range 8 { // 24 combinations: 3 sports x 2 dports x 4 dsts
			b.Build(buf)
			seen[[3]uint32{uint32(binary.BigEndian.Uint16(buf[34:])), uint32(binary.BigEndian.Uint16(buf[36:])), binary.BigEndian.Uint32(buf[30:])}]++
		}
	}
	if len(seen) != 24 {
		t.Errorf("%d distinct combinations of 24", len(seen))
	}
}

// TestWidePrefix: an IPv6 prefix shorter than /64 ranges over all its
// host bits: with -dst 2001:db8::/48 in random order, bits 48..63 change
// too, and the 48 bits of the prefix never do.
func TestWidePrefix(t *testing.T) {
	for _, bitsLen := range []int{48, 0} {
		c := cfg(craft.UDP, true, nil)
		c.Order, c.Seed = craft.Random, 3
		c.Dst = netip.PrefixFrom(netip.MustParseAddr("2001:db8::"), bitsLen)
		b, err := craft.New(c)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, b.MaxLen())
		var or, and [16]byte
		for i := range and {
			and[i] = 0xff
		}
		for i := range 64 {
			n := b.Build(buf)
			if _, err := judge.Frame(buf[:n]); err != nil {
				t.Fatalf("/%d frame %d: %v", bitsLen, i, err)
			}
			d := [16]byte(buf[14+24 : 14+40])
			if !c.Dst.Contains(netip.AddrFrom16(d)) {
				t.Fatalf("/%d: %v outside", bitsLen, netip.AddrFrom16(d))
			}
			for k := range d {
				or[k] |= d[k]
				and[k] &= d[k]
			}
		}
		// A host bit that never changed in 64 draws: 1 or 0 all along.
		for bit := bitsLen; bit < 128; bit++ {
			m := byte(0x80) >> (bit % 8)
			if or[bit/8]&m == and[bit/8]&m {
				t.Errorf("/%d: address bit %d is %d in all 64 frames", bitsLen, bit, and[bit/8]&m>>(7-bit%8))
			}
		}
	}
}
