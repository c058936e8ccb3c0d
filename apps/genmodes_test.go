package apps_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/judge"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// capFrame is one frame the capture took, with the kernel's receive time.
type capFrame struct {
	data []byte
	at   time.Time
}

// capture is an AF_PACKET socket on a link in its namespace, keeping the
// frames that arrive from the wire (not the namespace's own) for which
// keep says yes. The outer VLAN tag, which the kernel moves into the
// packet's metadata, is put back from PACKET_AUXDATA.
type capture struct {
	fd     int
	keep   func([]byte) bool
	mu     sync.Mutex
	frames []capFrame
	done   chan struct{}
	wg     sync.WaitGroup
}

func startCapture(t *testing.T, l *vethns.Link, keep func([]byte) bool) *capture {
	t.Helper()
	c := &capture{fd: -1, keep: keep, done: make(chan struct{})}
	err := l.NS.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		c.fd = fd
		// Room for a whole run, so that none is dropped while the
		// reader waits for a CPU.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 256<<20); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000}); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Index})
	})
	if err != nil {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
		t.Fatal(err)
	}
	c.wg.Add(1)
	go c.read()
	t.Cleanup(func() {
		close(c.done)
		c.wg.Wait()
		unix.Close(c.fd)
	})
	return c
}

func (c *capture) read() {
	defer c.wg.Done()
	b, oob := make([]byte, 1<<16), make([]byte, 512)
	for {
		n, oobn, _, from, err := unix.Recvmsg(c.fd, b[4:], oob, 0)
		select {
		case <-c.done:
			return
		default:
		}
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := b[4 : 4+n]
		var at time.Time
		cmsgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range cmsgs {
			switch {
			case m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= 20:
				status := binary.NativeEndian.Uint32(m.Data)
				tci, tpid := binary.NativeEndian.Uint16(m.Data[16:]), binary.NativeEndian.Uint16(m.Data[18:])
				if status&unix.TP_STATUS_VLAN_VALID != 0 && n >= 12 {
					if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
						tpid = 0x8100
					}
					copy(b[0:12], b[4:16]) // the MACs 4 bytes earlier, the tag after them
					binary.BigEndian.PutUint16(b[12:], tpid)
					binary.BigEndian.PutUint16(b[14:], tci)
					f = b[:4+n]
				}
			case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16:
				at = time.Unix(int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:])))
			}
		}
		if !c.keep(f) {
			continue
		}
		c.mu.Lock()
		c.frames = append(c.frames, capFrame{data: append([]byte(nil), f...), at: at})
		c.mu.Unlock()
	}
}

// wait waits (up to a generous deadline) for n frames, and then a
// moment for any beyond n, and returns what arrived.
func (c *capture) wait(t *testing.T, n int) []capFrame {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.frames)
		c.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // any extra frame has arrived by now
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]capFrame(nil), c.frames...)
}

// etherTypeAfterTags is a frame's EtherType after its VLAN tags.
func etherTypeAfterTags(f []byte) (uint16, int) {
	off := 12
	for len(f) >= off+4 {
		et := binary.BigEndian.Uint16(f[off:])
		if et != 0x8100 && et != 0x88a8 {
			return et, off + 2
		}
		off += 4
	}
	return 0, 0
}

// fromMAC keeps the frames sent from mac.
func fromMAC(mac []byte) func([]byte) bool {
	return func(f []byte) bool { return len(f) >= 14 && string(f[6:12]) == string(mac) }
}

// ipProto keeps the frames from mac of IP protocol proto (after tags).
func ipProto(mac []byte, proto uint8) func([]byte) bool {
	return func(f []byte) bool {
		if !fromMAC(mac)(f) {
			return false
		}
		et, off := etherTypeAfterTags(f)
		switch et {
		case 0x0800:
			return len(f) > off+9 && f[off+9] == proto
		case 0x86dd:
			return len(f) > off+6 && f[off+6] == proto
		}
		return false
	}
}

// genModeRun runs xdpgen in a's namespace with args and returns its
// summary.
//
// Unless args name -cpus, xdpgen's sending thread is pinned to the first
// CPU this process may run on: a copy-mode send runs in the kicking
// thread, and veth hands a frame for a peer without XDP (the capture's
// side) to the sending CPU's backlog, so a thread that moves between CPUs
// can reorder what the capture sees.
func genModeRun(t *testing.T, ns *vethns.NS, args ...string) genModeSummary {
	t.Helper()
	if !slices.Contains(args, "-cpus") {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			t.Fatalf("sched_getaffinity: %v", err)
		}
		cpu := 0
		for cpu < 1024 && !set.IsSet(cpu) {
			cpu++
		}
		args = append([]string{"-cpus", strconv.Itoa(cpu)}, args...)
	}
	stdout, stderr, code := runIn(t, ns, 120*time.Second, "xdpgen", append(args, "-quiet")...)
	if code != 0 {
		t.Fatalf("xdpgen %v: exit %d: %s%s", args, code, stdout, stderr)
	}
	var s genModeSummary
	if err := cli.ParseSummary(stdout, &s); err != nil {
		t.Fatalf("xdpgen: %v: %s", err, stdout)
	}
	if s.Completed != s.Frames || s.NotCompleted != 0 || !s.AccountingOK {
		t.Errorf("xdpgen %v: %+v", args, s)
	}
	return s
}

type genModeSummary struct {
	Mode                           string
	Sent, Bytes, Completed, Frames uint64
	NotCompleted, Skipped          uint64
	Loops                          int
	Seconds                        float64
	AccountingOK                   bool
}

// counterDelta waits until the peer kernel's counters have grown by at
// least want over before (or a generous deadline passes) and returns
// the growth of each.
func counterDelta(t *testing.T, ns *vethns.NS, before map[string]int64, want int64, keys ...string) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := ns.Counters()
		if err != nil {
			t.Fatal(err)
		}
		d := map[string]int64{}
		all := true
		for _, k := range keys {
			d[k] = now[k] - before[k]
			all = all && d[k] >= want
		}
		if all || time.Now().After(deadline) {
			time.Sleep(50 * time.Millisecond) // any beyond want
			now, _ = ns.Counters()
			for _, k := range keys {
				d[k] = now[k] - before[k]
			}
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counters(t *testing.T, ns *vethns.NS) map[string]int64 {
	t.Helper()
	c, err := ns.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const modeCount = 200 // frames per run: fewer than the peer's backlog and veth's ring

func family(v6 bool) string {
	if v6 {
		return "v6"
	}
	return "v4"
}

func peerAddr(p *vethns.Pair, v6 bool) netip.Addr {
	if v6 {
		return p.B.IPv6.Addr()
	}
	return p.B.IPv4.Addr()
}

// TestGenTCPSyn: -mode tcp-syn sends SYNs that gopacket reads with right
// checksums, Linux's options in Linux's order and a sequence number
// that differs in every one; the peer kernel, whose port is closed,
// answers each with a RST (Tcp:OutRsts) and finds no checksum error.
func TestGenTCPSyn(t *testing.T) {
	vethns.Require(t)
	for _, v6 := range []bool{false, true} {
		t.Run(family(v6), func(t *testing.T) {
			a, b := vethns.NewNS(t), vethns.NewNS(t)
			p := vethns.NewPair(t, a, b, nil)
			capt := startCapture(t, p.B, ipProto(p.A.MAC, 6))
			before := counters(t, b)
			s := genModeRun(t, a, "-i", p.A.Name, "-dst", peerAddr(p, v6).String(), "-mode", "tcp-syn",
				"-sport", "20000-20049", "-dport", "9", "-count", fmt.Sprint(modeCount), "-rate", "20k")
			frames := capt.wait(t, modeCount)
			d := counterDelta(t, b, before, modeCount, "Tcp:OutRsts", "Tcp:InSegs")
			t.Logf("xdpgen: %d sent, mode %s; capture %d SYNs; peer kernel: %v, InCsumErrors +%d", s.Sent, s.Mode, len(frames), d,
				counters(t, b)["Tcp:InCsumErrors"]-before["Tcp:InCsumErrors"])
			if s.Sent != modeCount || len(frames) != modeCount {
				t.Fatalf("sent %d, captured %d; want %d", s.Sent, len(frames), modeCount)
			}
			seqs := map[uint32]bool{}
			sports := map[uint16]bool{}
			for i, f := range frames {
				j, err := judge.Frame(f.data)
				if err != nil {
					t.Fatalf("SYN %d: %v", i, err)
				}
				tcp := j.TCP
				if tcp == nil || !tcp.SYN || tcp.ACK || tcp.RST || j.DPort != 9 || j.Dst != peerAddr(p, v6).String() {
					t.Fatalf("SYN %d: %+v", i, j)
				}
				var kinds []string
				for _, o := range tcp.Options {
					kinds = append(kinds, o.OptionType.String())
				}
				if got := fmt.Sprint(kinds); got != "[MSS SACKPermitted Timestamps NOP WindowScale]" {
					t.Fatalf("SYN %d: options %s", i, got)
				}
				seqs[tcp.Seq] = true
				sports[j.SPort] = true
			}
			if len(seqs) != modeCount || len(sports) != 50 {
				t.Errorf("%d distinct sequence numbers, %d source ports; want %d and 50", len(seqs), len(sports), modeCount)
			}
			if d["Tcp:OutRsts"] != modeCount {
				t.Errorf("peer kernel sent %d RSTs for %d SYNs to a closed port", d["Tcp:OutRsts"], modeCount)
			}
			if e := counters(t, b)["Tcp:InCsumErrors"] - before["Tcp:InCsumErrors"]; e != 0 {
				t.Errorf("peer kernel: %d TCP checksum errors", e)
			}
		})
	}
}

// TestGenICMPEcho: -mode icmp-echo sends echo requests that gopacket
// reads with right checksums (ICMPv6's over the pseudo-header), the
// identifier of -sport and sequence numbers 0, 1, 2, ...; the peer
// kernel counts each (InEchos) and replies to each.
func TestGenICMPEcho(t *testing.T) {
	vethns.Require(t)
	for _, v6 := range []bool{false, true} {
		t.Run(family(v6), func(t *testing.T) {
			a, b := vethns.NewNS(t), vethns.NewNS(t)
			p := vethns.NewPair(t, a, b, nil)
			proto, in, out := uint8(1), "Icmp:InEchos", "Icmp:OutEchoReps"
			if v6 {
				proto, in, out = 58, "Icmp6:InEchos", "Icmp6:OutEchoReplies"
			}
			capt := startCapture(t, p.B, ipProto(p.A.MAC, proto))
			before := counters(t, b)
			s := genModeRun(t, a, "-i", p.A.Name, "-dst", peerAddr(p, v6).String(), "-mode", "icmp-echo",
				"-sport", "777", "-size", "100", "-count", fmt.Sprint(modeCount), "-rate", "20k")
			frames := capt.wait(t, modeCount)
			d := counterDelta(t, b, before, modeCount, in, out)
			t.Logf("xdpgen: %d sent; capture %d echo requests; peer kernel: %v", s.Sent, len(frames), d)
			// Neighbour discovery and the like are ICMPv6 too: only the
			// echo requests count.
			n := 0
			for _, f := range frames {
				j, err := judge.Frame(f.data)
				if err != nil {
					t.Fatalf("frame %d: %v", n, err)
				}
				if j.ICMPType != map[bool]uint8{false: 8, true: 128}[v6] {
					continue
				}
				if j.ICMPID != 777 || j.ICMPSeq != uint16(n) || len(f.data) != 100 {
					t.Fatalf("echo %d: id %d seq %d, %d bytes", n, j.ICMPID, j.ICMPSeq, len(f.data))
				}
				n++
			}
			if s.Sent != modeCount || n != modeCount {
				t.Errorf("sent %d, captured %d echo requests; want %d", s.Sent, n, modeCount)
			}
			if d[in] != modeCount || d[out] != modeCount {
				t.Errorf("peer kernel: %s +%d, %s +%d; want %d each", in, d[in], out, d[out], modeCount)
			}
		})
	}
}

// TestGenRaw: -mode raw sends frames of the EtherType asked, the pattern
// repeated after the header, of the sizes asked, without an IP address.
func TestGenRaw(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	capt := startCapture(t, p.B, func(f []byte) bool { et, _ := etherTypeAfterTags(f); return et == 0x88b6 })
	s := genModeRun(t, a, "-i", p.A.Name, "-dst-mac", p.B.MAC.String(), "-mode", "raw", "-ethertype", "0x88b6",
		"-pattern", "deadbeef01", "-size", "60,1514", "-count", fmt.Sprint(modeCount), "-rate", "20k")
	frames := capt.wait(t, modeCount)
	if s.Sent != modeCount || len(frames) != modeCount {
		t.Fatalf("sent %d, captured %d; want %d", s.Sent, len(frames), modeCount)
	}
	pat := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	for i, f := range frames {
		want := []int{60, 1514}[i%2]
		if len(f.data) != want || string(f.data[:6]) != string(p.B.MAC) || string(f.data[6:12]) != string(p.A.MAC) {
			t.Fatalf("frame %d: %d bytes, MACs %x; want %d bytes", i, len(f.data), f.data[:12], want)
		}
		for k, c := range f.data[14:] {
			if c != pat[k%len(pat)] {
				t.Fatalf("frame %d: byte %d is %#x, want %#x", i, 14+k, c, pat[k%len(pat)])
			}
		}
	}
}

// TestGenModeFlags: xdpgen refuses the new flags' bad values with a
// message naming the flag, and exits 2 before it opens a socket.
func TestGenModeFlags(t *testing.T) {
	vethns.Require(t)
	ns, other := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, ns, other, nil)
	ifc, peer := p.A.Name, p.B.IPv4.Addr().String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-mode", "bogus"}, "-mode \"bogus\""},
		{[]string{"-pcap", "x.pcap"}, "-pcap: with -mode pcap"},
		{[]string{"-mode", "pcap"}, "-pcap FILE required"},
		{[]string{"-mode", "pcap", "-pcap", "x.pcap", "-pcap-timing", "fast"}, "-pcap-timing"},
		{[]string{"-mode", "tcp-syn", "-size", "100"}, "tcp-syn frames are 74 bytes"},
		{[]string{"-vlan", "5000"}, "-vlan"},
		{[]string{"-vlan", "1,2,3"}, "-vlan"},
		{[]string{"-sport", "9-3"}, "-sport"},
		{[]string{"-dport", "0"}, "-dport"},
		{[]string{"-order", "shuffled"}, "-order"},
		{[]string{"-rate-layer", "l3"}, "-rate-layer"},
		{[]string{"-mode", "raw", "-ethertype", "0x0100"}, "-ethertype"},
		{[]string{"-mode", "raw", "-pattern", "xyz"}, "-pattern"},
		{[]string{"-vlan", "7", "-timestamp"}, "-timestamp"},
		{[]string{"-dst", "198.18.0.0/33"}, "-dst"},
		{[]string{"-mode", "icmp-echo", "-size", "41"}, "below the 42 bytes"},
		{[]string{"-mode", "pcap", "-pcap", "x.pcap", "-vlan", "5"}, "do not apply"},
		{[]string{"-mode", "raw", "-sport", "1-9"}, "do not apply"},
	} {
		args := append([]string{"-i", ifc, "-dst", peer}, tc.args...)
		if tc.args[0] == "-dst" {
			args = append([]string{"-i", ifc}, tc.args...)
		}
		_, stderr, code := runIn(t, ns, 30*time.Second, "xdpgen", args...)
		if code != cli.ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("xdpgen %v: exit %d, %q; want exit %d and %q", tc.args, code, stderr, cli.ExitUsage, tc.want)
		}
	}
	_, stderr, code := runIn(t, ns, 30*time.Second, "xdpgen", "-i", ifc, "-mode", "raw")
	if code != cli.ExitUsage || !strings.Contains(stderr, "-dst or -dst-mac") {
		t.Errorf("raw without a MAC: exit %d, %q", code, stderr)
	}
}

// TestGenQueuesSequential: with -queues 2 the queues split a sequential
// walk, so the frames of both together still hold every combination once
// per round.
func TestGenQueuesSequential(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: 2})
	capt := startCapture(t, p.B, ipProto(p.A.MAC, 6))
	const n = 2 * 64 // two rounds of 4 x 4 x 4 combinations
	s := genModeRun(t, a, "-i", p.A.Name, "-queues", "2", "-cpus", "none", "-dst", p.B.IPv4.Masked().String(),
		"-dst-mac", p.B.MAC.String(), "-src", p.A.IPv4.Addr().String(), "-mode", "tcp-syn",
		"-sport", "40000-40003", "-dport", "80-83", "-count", fmt.Sprint(n), "-rate", "20k")
	frames := capt.wait(t, n)
	if s.Sent != n || len(frames) != n {
		t.Fatalf("sent %d, captured %d; want %d", s.Sent, len(frames), n)
	}
	tu, _ := tuples(t, frames)
	count := map[fieldTuple]int{}
	for _, f := range tu {
		count[f]++
	}
	for f, c := range count {
		if c != 2 {
			t.Errorf("%+v sent %d times, want 2", f, c)
		}
	}
	if len(count) != 64 {
		t.Errorf("%d combinations, want 64", len(count))
	}
}

// TestGenEngineUDPRecv: UDP from the field engine (random source ports,
// in a VLAN-free frame) carries xdprecv's payload: xdprecv finds every
// datagram valid, with right checksums and no gap.
func TestGenEngineUDPRecv(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	recv := startRecv(t, b, p.B.Name)
	s := genModeRun(t, a, "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(), "-sport", "10000-10099", "-order", "random",
		"-size", "64,594,1514", "-count", fmt.Sprint(rbCount), "-rate", "20k")
	r := recvResult(t, recv)
	t.Logf("xdpgen sent %d; xdprecv: %+v", s.Sent, r)
	if r.Valid != rbCount || r.BadIPCsum+r.BadUDPCsum+r.PartialUDPCsum+r.BadPayload != 0 || r.Lost != 0 {
		t.Errorf("xdprecv: %+v", r)
	}
}
