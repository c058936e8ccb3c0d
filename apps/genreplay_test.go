package apps_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/xdpkit/xdpkit/apps/internal/judge"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// fieldTuple is what the field engine varies, as the capture read it.
type fieldTuple struct {
	src, dst     string
	sport, dport uint16
}

// tuples judges every frame and returns its fields in arrival order.
func tuples(t *testing.T, frames []capFrame) ([]fieldTuple, []judge.Result) {
	t.Helper()
	var out []fieldTuple
	var rs []judge.Result
	for i, f := range frames {
		j, err := judge.Frame(f.data)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		out = append(out, fieldTuple{j.Src, j.Dst, j.SPort, j.DPort})
		rs = append(rs, j)
	}
	return out, rs
}

// TestGenFieldEngine: destination and source prefixes and port ranges,
// walked sequentially (every combination once per round), and randomly
// (the same frames for the same -seed, others for another), over IPv4
// and IPv6, with one VLAN tag and with two (QinQ, TPIDs 0x88a8 then
// 0x8100), in UDP and TCP SYN
// frames whose checksums gopacket finds right.
func TestGenFieldEngine(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	for _, tc := range []struct {
		name  string
		v6    bool
		mode  string
		vlan  string
		order string
	}{
		{"udp-v4-seq", false, "udp", "", "sequential"},
		{"syn-v6-seq-vlan", true, "tcp-syn", "100", "sequential"},
		{"udp-v6-random-qinq", true, "udp", "100,200", "random"},
		{"syn-v4-random", false, "tcp-syn", "", "random"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Prefixes of 4 addresses each way, 4 source ports, 2
			// destination ports: 128 combinations, 256 frames.
			dst, src := p.B.IPv4.Masked().String(), p.A.IPv4.Masked().String()
			proto := uint8(17)
			if tc.v6 {
				dst = netip.PrefixFrom(p.B.IPv6.Addr(), 126).Masked().String()
				src = netip.PrefixFrom(p.A.IPv6.Addr(), 126).Masked().String()
			}
			if tc.mode == "tcp-syn" {
				proto = 6
			}
			const n = 256
			run := func(seed string) []fieldTuple {
				capt := startCapture(t, p.B, ipProto(p.A.MAC, proto))
				args := []string{"-i", p.A.Name, "-dst", dst, "-src", src, "-dst-mac", p.B.MAC.String(), "-mode", tc.mode,
					"-sport", "30000-30003", "-dport", "9000-9001", "-order", tc.order, "-seed", seed,
					"-count", fmt.Sprint(n), "-rate", "20k"}
				if tc.vlan != "" {
					args = append(args, "-vlan", tc.vlan)
				}
				if tc.mode == "udp" {
					args = append(args, "-size", "200")
				}
				s := genModeRun(t, a, args...)
				frames := capt.wait(t, n)
				if s.Sent != n || len(frames) != n {
					t.Fatalf("sent %d, captured %d; want %d", s.Sent, len(frames), n)
				}
				tu, rs := tuples(t, frames)
				for i, r := range rs {
					if got := fmt.Sprint(r.VLANs); tc.vlan != "" && got != "["+strings.ReplaceAll(tc.vlan, ",", " ")+"]" || tc.vlan == "" && len(r.VLANs) != 0 {
						t.Fatalf("frame %d: VLANs %v, want %s", i, r.VLANs, tc.vlan)
					}
					// 802.1Q; QinQ: an 802.1ad S-tag outside.
					wantTPIDs := map[int]string{0: "[]", 1: "[0x8100]", 2: "[0x88a8 0x8100]"}[len(r.VLANs)]
					if got := fmt.Sprintf("%#04x", r.TPIDs); got != wantTPIDs {
						t.Fatalf("frame %d: TPIDs %s, want %s", i, got, wantTPIDs)
					}
				}
				return tu
			}
			first := run("7")
			count := map[fieldTuple]int{}
			srcs, dsts := map[string]bool{}, map[string]bool{}
			for _, f := range first {
				count[f]++
				srcs[f.src], dsts[f.dst] = true, true
				if f.sport < 30000 || f.sport > 30003 || f.dport < 9000 || f.dport > 9001 {
					t.Fatalf("ports out of range: %+v", f)
				}
			}
			if len(srcs) != 4 || len(dsts) != 4 {
				t.Errorf("%d sources, %d destinations; want 4 each", len(srcs), len(dsts))
			}
			if tc.order == "sequential" {
				for f, c := range count {
					if c != 2 {
						t.Fatalf("sequential: %+v sent %d times, want 2 (every combination once per round)", f, c)
					}
				}
				if len(count) != 128 {
					t.Errorf("sequential: %d combinations, want 128", len(count))
				}
				return
			}
			// Random: the same seed repeats the run frame for frame;
			// another seed does not.
			if again := run("7"); !slices.Equal(first, again) {
				t.Errorf("-seed 7 twice: different frames")
			}
			other := run("8")
			same := 0
			for i := range first {
				if first[i] == other[i] {
					same++
				}
			}
			if same > n/4 {
				t.Errorf("-seed 7 and -seed 8: %d of %d frames alike", same, n)
			}
			if len(count) < 64 {
				t.Errorf("random: only %d of 128 combinations in %d frames", len(count), n)
			}
		})
	}
}

// TestGenVLANFullMTU: with -vlan, a frame of the full MTU is 1518 bytes
// (the tag is not in the MTU): xdpgen sends it and the peer receives it,
// tag and checksums right.
func TestGenVLANFullMTU(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	const n = 20
	capt := startCapture(t, p.B, ipProto(p.A.MAC, 17))
	s := genModeRun(t, a, "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(), "-dst-mac", p.B.MAC.String(),
		"-vlan", "100", "-size", "1518", "-count", fmt.Sprint(n), "-rate", "1k")
	frames := capt.wait(t, n)
	if s.Sent != n || len(frames) != n {
		t.Fatalf("sent %d, captured %d; want %d", s.Sent, len(frames), n)
	}
	_, rs := tuples(t, frames)
	for i, f := range frames {
		if len(f.data) != 1518 || fmt.Sprint(rs[i].VLANs) != "[100]" {
			t.Fatalf("frame %d: %d bytes, VLANs %v; want 1518, [100]", i, len(f.data), rs[i].VLANs)
		}
	}
}

// TestGenRateLayers: a bit rate counts frame bytes (-rate-layer l2) or
// frame bytes plus 24 of preamble, FCS and gap (l1): at 1 Mbps, 100-byte
// frames go at 1250/s in l2 and 1008/s in l1. Each run's packets per
// second, from its own summary, is at most 5% above the rate and at
// least half of it; their ratio is 124/100 within 10%.
func TestGenRateLayers(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	pps := map[string]float64{}
	for _, mode := range []string{"udp", "icmp-echo"} {
		for _, layer := range []string{"l2", "l1"} {
			s := genModeRun(t, a, "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(), "-mode", mode, "-size", "100",
				"-rate", "1Mbps", "-rate-layer", layer, "-duration", "1s")
			want := 1e6 / 8 / 100
			if layer == "l1" {
				want = 1e6 / 8 / 124
			}
			got := float64(s.Sent) / s.Seconds
			pps[mode+layer] = got
			t.Logf("%s %s: %d frames in %.3f s: %.0f/s, want %.0f/s", mode, layer, s.Sent, s.Seconds, got, want)
			if got > want*1.05 || got < want/2 {
				t.Errorf("%s -rate 1Mbps -rate-layer %s: %.0f frames/s, want %.0f", mode, layer, got, want)
			}
		}
		if r := pps[mode+"l2"] / pps[mode+"l1"]; r < 1.24*0.9 || r > 1.24*1.1 {
			t.Errorf("%s: l2/l1 frame rates %.3f, want 1.24", mode, r)
		}
	}
}

// TestGenDuration: -duration ends every mode after that long of sending
// (and no earlier), -count after that many packets.
func TestGenDuration(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	f := filepath.Join(t.TempDir(), "one.pcap")
	writePcap(t, f, "pcap", synthFrames(10, p), time.Millisecond)
	dst := p.B.IPv4.Addr().String()
	for _, args := range [][]string{
		{"-mode", "udp", "-vlan", "5"},
		{"-mode", "tcp-syn"},
		{"-mode", "icmp-echo"},
		{"-mode", "raw", "-dst-mac", p.B.MAC.String()},
		{"-mode", "pcap", "-pcap", f, "-loop", "0"},
	} {
		s := genModeRun(t, a, append([]string{"-i", p.A.Name, "-dst", dst, "-rate", "2k", "-duration", "300ms"}, args...)...)
		if s.Seconds < 0.3 || s.Sent == 0 || s.Completed != s.Frames {
			t.Errorf("%v -duration 300ms: %d sent in %.3f s", args, s.Sent, s.Seconds)
		}
		s = genModeRun(t, a, append([]string{"-i", p.A.Name, "-dst", dst, "-rate", "20k", "-count", "123"}, args...)...)
		if s.Sent != 123 {
			t.Errorf("%v -count 123: %d sent", args, s.Sent)
		}
	}
}

// synthFrames are n UDP frames of random sizes and payloads between
// addresses and MACs that are not the pair's (replay rewrites the
// MACs; -pcap-rewrite-ip the addresses).
func synthFrames(n int, p *vethns.Pair) [][]byte {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([][]byte, 0, n)
	for i := range n {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 9, 9, 9, 9, 1}, DstMAC: net.HardwareAddr{2, 9, 9, 9, 9, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: uint16(i), Protocol: layers.IPProtocolUDP,
			SrcIP: net.IP{198, 19, 200, 1}, DstIP: net.IP{198, 19, 200, 2}}
		udp := &layers.UDP{SrcPort: layers.UDPPort(40000 + i%100), DstPort: 9999}
		udp.SetNetworkLayerForChecksum(ip)
		pl := make([]byte, 18+r.IntN(400))
		for k := range pl {
			pl[k] = byte(r.Uint32())
		}
		binary.BigEndian.PutUint32(pl, uint32(i)) // the frame's number
		buf := gopacket.NewSerializeBuffer()
		gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, eth, ip, udp, gopacket.Payload(pl))
		out = append(out, append([]byte(nil), buf.Bytes()...))
	}
	return out
}

// writePcap writes frames with gopacket's writers, gap apart (or the
// gaps given per frame by gaps, cycled).
func writePcap(t *testing.T, path, format string, frames [][]byte, gaps ...time.Duration) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	t0 := time.Unix(1700000000, 0)
	at := t0
	var write func(gopacket.CaptureInfo, []byte) error
	var flush func() error
	switch format {
	case "pcap":
		w := pcapgo.NewWriterNanos(bw)
		if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
			t.Fatal(err)
		}
		write, flush = w.WritePacket, func() error { return nil }
	case "pcapng":
		w, err := pcapgo.NewNgWriter(bw, layers.LinkTypeEthernet)
		if err != nil {
			t.Fatal(err)
		}
		write, flush = w.WritePacket, w.Flush
	}
	for i, fr := range frames {
		if err := write(gopacket.CaptureInfo{Timestamp: at, CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
			t.Fatal(err)
		}
		at = at.Add(gaps[i%len(gaps)])
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
}

// frameNo is the number synthFrames wrote into a frame's payload.
func frameNo(f []byte) (uint32, bool) {
	if len(f) < 46 {
		return 0, false
	}
	return binary.BigEndian.Uint32(f[42:]), true
}

// udpTo keeps UDP frames from mac to port.
func udpTo(mac []byte, port uint16) func([]byte) bool {
	return func(f []byte) bool {
		return ipProto(mac, 17)(f) && len(f) >= 38 && binary.BigEndian.Uint16(f[36:]) == port
	}
}

// TestGenPcapReplay: a 100,000-frame capture (written by gopacket's
// pcapgo) replayed at a rate arrives byte for byte as in the file, but
// for the MACs, which are this interface's and the peer's; a pcapng file
// replayed -loop 3 times arrives three times over, in order; with
// -pcap-rewrite-ip its addresses are the pair's and its checksums (as
// gopacket computes them) right.
func TestGenPcapReplay(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	dir := t.TempDir()
	t.Run("100k", func(t *testing.T) {
		const n = 100000
		frames := synthFrames(n, p)
		f := filepath.Join(dir, "100k.pcap")
		writePcap(t, f, "pcap", frames, time.Microsecond)
		capt := startCapture(t, p.B, udpTo(p.A.MAC, 9999))
		s := genModeRun(t, a, "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(), "-mode", "pcap", "-pcap", f,
			"-rate", "25k", "-batch", "16")
		got := capt.wait(t, n)
		t.Logf("xdpgen: %d sent in %.2f s, %d skipped; captured %d", s.Sent, s.Seconds, s.Skipped, len(got))
		if s.Sent != n || s.Skipped != 0 || len(got) != n {
			t.Fatalf("sent %d (skipped %d), captured %d; want %d", s.Sent, s.Skipped, len(got), n)
		}
		bad := 0
		for i, g := range got {
			want := append([]byte(nil), frames[i]...)
			copy(want[0:6], p.B.MAC)
			copy(want[6:12], p.A.MAC)
			if !bytes.Equal(g.data, want) {
				if bad++; bad <= 3 {
					t.Errorf("frame %d differs from the file's:\n got %x\nwant %x", i, g.data, want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d frames differ from the file's", bad, n)
		}
	})
	t.Run("pcapng-loop-rewrite", func(t *testing.T) {
		const n = 500
		frames := synthFrames(n, p)
		f := filepath.Join(dir, "loop.pcapng")
		writePcap(t, f, "pcapng", frames, time.Microsecond)
		capt := startCapture(t, p.B, udpTo(p.A.MAC, 9999))
		s := genModeRun(t, a, "-i", p.A.Name, "-src", p.A.IPv4.Addr().String(), "-dst", p.B.IPv4.Addr().String(),
			"-mode", "pcap", "-pcap", f, "-loop", "3", "-pcap-rewrite-ip", "-rate", "20k")
		got := capt.wait(t, 3*n)
		if s.Sent != 3*n || s.Loops != 3 || len(got) != 3*n {
			t.Fatalf("sent %d in %d loops, captured %d; want %d in 3", s.Sent, s.Loops, len(got), 3*n)
		}
		for i, g := range got {
			j, err := judge.Frame(g.data)
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			no, _ := frameNo(g.data)
			if j.Src != p.A.IPv4.Addr().String() || j.Dst != p.B.IPv4.Addr().String() || int(no) != i%n ||
				!bytes.Equal(g.data[34:40], frames[i%n][34:40]) || !bytes.Equal(g.data[42:], frames[i%n][42:]) {
				t.Fatalf("frame %d (file's %d): %s -> %s, number %d", i, i%n, j.Src, j.Dst, no)
			}
		}
	})
}

// TestGenPcapTiming: -pcap-timing original replays a capture whose
// frames are 2 ms and 20 ms apart, alternately (0.64 s), with its timing.
// The sender never lets a frame go before its time from the first one's
// (TestReplayNeverEarly, with the test's own clock); here each frame's
// offset from its time in the file is measured by the peer kernel's
// receive times, and a frame's lateness is its offset less the smallest
// offset of the run (the first frame too may have been held up). The
// median lateness must be below the median 20 ms gap the run measured: a
// replay that ignored the file's timing, or stretched it, would be late
// by a good part of the 0.64 s. A busy machine may wake the sender late
// for some frames (the ones after a late frame keep their own times, so
// a 20 ms gap can shrink); the test logs how many 20 ms gaps stayed
// longer than the median 2 ms gap but does not judge by it. At
// -pcap-timing rate (20k/s) the same file must take less than half its
// span: the test can tell the two apart.
func TestGenPcapTiming(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	const n = 60
	frames := synthFrames(n, p)
	f := filepath.Join(t.TempDir(), "timed.pcap")
	gaps := []time.Duration{2 * time.Millisecond, 20 * time.Millisecond}
	writePcap(t, f, "pcap", frames, gaps...)
	var fileAt []time.Duration
	for i := range n {
		if i == 0 {
			fileAt = append(fileAt, 0)
			continue
		}
		fileAt = append(fileAt, fileAt[i-1]+gaps[(i-1)%2])
	}
	run := func(timing string) []capFrame {
		capt := startCapture(t, p.B, udpTo(p.A.MAC, 9999))
		s := genModeRun(t, a, "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(), "-mode", "pcap", "-pcap", f,
			"-pcap-timing", timing, "-rate", "20k")
		got := capt.wait(t, n)
		if s.Sent != n || len(got) != n {
			t.Fatalf("-pcap-timing %s: sent %d, captured %d; want %d", timing, s.Sent, len(got), n)
		}
		return got
	}
	got := run("original")
	var offs []time.Duration
	for i, g := range got {
		offs = append(offs, g.at.Sub(got[0].at)-fileAt[i])
	}
	ref := slices.Min(offs)
	var late []time.Duration
	var short, long []time.Duration
	for i, g := range got {
		late = append(late, offs[i]-ref)
		if i > 0 {
			gap := g.at.Sub(got[i-1].at)
			if (i-1)%2 == 0 {
				short = append(short, gap)
			} else {
				long = append(long, gap)
			}
		}
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	sort.Slice(short, func(i, j int) bool { return short[i] < short[j] })
	sort.Slice(long, func(i, j int) bool { return long[i] < long[j] })
	medShort, medLong := short[len(short)/2], long[len(long)/2]
	longer := 0
	for _, g := range long {
		if g > medShort {
			longer++
		}
	}
	span := got[n-1].at.Sub(got[0].at)
	t.Logf("original timing: file span %v, measured %v; median lateness %v, largest %v; median 2 ms gap %v, 20 ms gap %v; %d of %d 20 ms gaps longer than the median 2 ms one",
		fileAt[n-1], span, late[len(late)/2], late[len(late)-1], medShort, medLong, longer, len(long))
	if m := late[len(late)/2]; m >= medLong {
		t.Errorf("median lateness %v, not below the median 20 ms gap measured, %v", m, medLong)
	}
	// The capture alternates gaps of 2 and 20 ms: a replay that spread
	// its packets evenly would pass the bound above, not this one.
	if medLong <= medShort {
		t.Errorf("the capture's 20 ms gaps came out no longer than its 2 ms gaps (medians %v and %v)", medLong, medShort)
	}
	fast := run("rate")
	if fs := fast[n-1].at.Sub(fast[0].at); fs > fileAt[n-1]/2 {
		t.Errorf("-pcap-timing rate at 20k/s took %v, the file's timing %v: the test cannot tell them apart", fs, fileAt[n-1])
	}
}
