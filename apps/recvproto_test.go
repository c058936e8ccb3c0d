package apps_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// jsonProc is a program started with -json inside a namespace: its
// standard output lines, parsed by Type.
type jsonProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []map[string]any
	raw    []string
	stderr strings.Builder
	ready  chan struct{}
	done   chan struct{}
}

func startJSON(t *testing.T, ns *vethns.NS, name string, args ...string) *jsonProc {
	t.Helper()
	p := &jsonProc{ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.Name, path(name)}, args...)...)
	p.cmd.Stderr = &lockedBuilder{mu: &p.mu, b: &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		once := sync.OnceFunc(func() { close(p.ready) })
		for sc.Scan() {
			var m map[string]any
			err := json.Unmarshal(sc.Bytes(), &m)
			p.mu.Lock()
			p.raw = append(p.raw, sc.Text())
			if err == nil {
				p.lines = append(p.lines, m)
			}
			p.mu.Unlock()
			if err == nil && m["Type"] == "ready" {
				once()
			}
		}
		_ = p.cmd.Wait()
	}()
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("%s exited before ready: %s", name, p.errText())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready after 30s: %s", name, p.errText())
	}
	return p
}

type lockedBuilder struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedBuilder) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

func (p *jsonProc) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(p.stderr.String())
}

// stop ends the program (SIGTERM, then SIGKILL after 10s) and waits.
func (p *jsonProc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop on SIGTERM within 10s: killed", p.cmd.Args[3])
	}
}

// byType returns the lines of one type.
func (p *jsonProc) byType(typ string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, m := range p.lines {
		if m["Type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

// num reads a number at a path of keys in a JSON object (0 if absent).
func num(m map[string]any, keys ...string) float64 {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return 0
		}
		v = o[k]
	}
	f, _ := v.(float64)
	return f
}

// frameSender writes hand-built Ethernet frames on a link through
// AF_PACKET.
type frameSender struct {
	fd       int
	addr     unix.SockaddrLinklayer
	from, to *vethns.Link
}

func newFrameSender(t *testing.T, from, to *vethns.Link) *frameSender {
	t.Helper()
	s := &frameSender{fd: -1, from: from, to: to, addr: unix.SockaddrLinklayer{Ifindex: from.Index, Halen: 6}}
	if err := from.NS.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket(AF_PACKET)", err)
		}
		s.fd = fd
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s.fd) })
	return s
}

func (s *frameSender) send(t *testing.T, f []byte) {
	t.Helper()
	copy(f[0:6], s.to.MAC)
	copy(f[6:12], s.from.MAC)
	a := s.addr
	et := binary.BigEndian.Uint16(f[12:])
	a.Protocol = et<<8 | et>>8
	// ENOBUFS: the device's queue is full (a slow machine, an emulated
	// one): the frame was not sent, so send it again once the queue has
	// drained, for a bounded time.
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := unix.Sendto(s.fd, f, 0, &a)
		if err == nil {
			return
		}
		if err != unix.ENOBUFS || time.Now().After(deadline) {
			t.Fatalf("sendto: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// l4Frame builds an IPv4 or IPv6 frame from s's link to its peer around
// the transport segment seg, its checksum (at csumOff; -1: none) filled,
// with a pseudo-header unless proto is ICMP.
func (s *frameSender) l4Frame(v6 bool, proto uint8, seg []byte, csumOff int) []byte {
	var b []byte
	var l4 []byte
	var ph uint32
	if !v6 {
		b = make([]byte, 34+len(seg))
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:34]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(seg)))
		ip[8], ip[9] = 64, proto
		src, dst := s.from.IPv4.Addr().As4(), s.to.IPv4.Addr().As4()
		copy(ip[12:], src[:])
		copy(ip[16:], dst[:])
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
		l4 = b[34:]
		if proto != 1 {
			ph = csum.PseudoHeaderIPv4(src, dst, proto, uint16(len(seg)))
		}
	} else {
		b = make([]byte, 54+len(seg))
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		ip := b[14:54]
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(seg)))
		ip[6], ip[7] = proto, 64
		src, dst := s.from.IPv6.Addr().As16(), s.to.IPv6.Addr().As16()
		copy(ip[8:], src[:])
		copy(ip[24:], dst[:])
		l4 = b[54:]
		ph = csum.PseudoHeaderIPv6(src, dst, proto, uint32(len(seg)))
	}
	copy(l4, seg)
	if csumOff >= 0 {
		binary.BigEndian.PutUint16(l4[csumOff:], csum.Checksum(l4, ph))
	}
	return b
}

func (s *frameSender) syn(v6 bool, sport, dport uint16) []byte {
	tcp := make([]byte, 24)
	binary.BigEndian.PutUint16(tcp, sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], uint32(sport)*7919)
	tcp[12], tcp[13] = 6<<4, 0x02
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	tcp[20], tcp[21] = 2, 4
	binary.BigEndian.PutUint16(tcp[22:], 1460)
	return s.l4Frame(v6, 6, tcp, 16)
}

func (s *frameSender) echo(v6 bool, id, seq uint16) []byte {
	icmp := make([]byte, 24)
	icmp[0] = 8
	proto := uint8(1)
	if v6 {
		icmp[0], proto = 128, 58
	}
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	return s.l4Frame(v6, proto, icmp, 2)
}

func rawEther(et uint16, n int) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint16(b[12:], et)
	binary.BigEndian.PutUint32(b[14:], uint32(n))
	return b
}

// vethDrops is what the veth from A to B dropped on the way: A's TX
// drops (a full XDP ring on B's side counts there). B's RX drops are not
// among them: they count frames the kernel had no use for.
func vethDrops(t *testing.T, p *vethns.Pair) uint64 {
	t.Helper()
	a, err := topo.Stats(p.A)
	if err != nil {
		t.Fatal(err)
	}
	return a.TxDropped
}

// TestRecvProtoJSON: xdprecv -all takes TCP SYNs, ICMP and ICMPv6 echo
// requests and frames of a non-IP EtherType sent by hand through
// AF_PACKET, counts each kind and its flows, and writes a -json stream
// whose intervals add up to its summary.
func TestRecvProtoJSON(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	recv := startJSON(t, b, "xdprecv", "-i", p.B.Name, "-all", "-json", "-duration", "120s")
	s := newFrameSender(t, p.A, p.B)
	const perKind = 200
	drops0 := vethDrops(t, p)
	for i := range perKind {
		for _, v6 := range []bool{false, true} {
			s.send(t, s.syn(v6, uint16(20000+i%10), 80))  // 10 flows per family
			s.send(t, s.echo(v6, uint16(i%4), uint16(i))) // 4 flows per family
		}
		s.send(t, rawEther(0x88b5, i))
	}
	sent := uint64(5 * perKind)
	// Wait for the intervals to account for every frame the veth did
	// not drop.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got float64
		for _, iv := range recv.byType("interval") {
			got += num(iv, "Packets")
		}
		if uint64(got)+vethDrops(t, p)-drops0 >= sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the intervals count %v of %d frames sent (veth drops %d): %s", got, sent, vethDrops(t, p)-drops0, recv.errText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	recv.stop(t)
	sums := recv.byType("summary")
	if len(sums) != 1 {
		t.Fatalf("%d summary lines; stdout:\n%s", len(sums), strings.Join(recv.raw, "\n"))
	}
	sum := sums[0]
	drops := vethDrops(t, p) - drops0
	var ivPackets float64
	for _, iv := range recv.byType("interval") {
		ivPackets += num(iv, "Packets")
	}
	if ivPackets != num(sum, "Packets") {
		t.Errorf("intervals add up to %v packets, the summary says %v", ivPackets, num(sum, "Packets"))
	}
	kinds := map[string]float64{
		"TCPSYN":            num(sum, "Proto", "TCPSYN"),
		"ICMPEchoRequest":   num(sum, "Proto", "ICMPEchoRequest"),
		"ICMPv6EchoRequest": num(sum, "Proto", "ICMPv6EchoRequest"),
		"0x88b5":            num(sum, "Proto", "Raw", "0x88b5"),
	}
	want := map[string]float64{"TCPSYN": 2 * perKind, "ICMPEchoRequest": perKind, "ICMPv6EchoRequest": perKind, "0x88b5": perKind}
	var total float64
	for k, v := range kinds {
		total += v
		if v > want[k] || v == 0 || drops == 0 && v != want[k] {
			t.Errorf("%s: %v received, %v sent (veth drops %d)", k, v, want[k], drops)
		}
	}
	if uint64(total)+drops < sent {
		t.Errorf("received %v + veth drops %d < %d sent", total, drops, sent)
	}
	if drops == 0 && (num(sum, "Proto", "TCPSYNFlows") != 20 || num(sum, "Proto", "ICMPEchoFlows") != 8) {
		t.Errorf("flows: SYN %v (want 20), echo %v (want 8)", num(sum, "Proto", "TCPSYNFlows"), num(sum, "Proto", "ICMPEchoFlows"))
	}
	for _, k := range []string{"TCPBadCsum", "ICMPBadCsum", "TCPPartialCsum"} {
		if num(sum, "Proto", k) != 0 {
			t.Errorf("%s %v: want 0", k, num(sum, "Proto", k))
		}
	}
	if num(sum, "Other") != 0 {
		t.Errorf("Other %v: want 0", num(sum, "Other"))
	}
}

// TestRecvFilterTCPEtherType: with -tcp -port 0 -ethertype the XDP
// program hands xdprecv TCP and the listed EtherType, and leaves ICMP and
// other EtherTypes to the kernel.
func TestRecvFilterTCPEtherType(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	recv := startJSON(t, b, "xdprecv", "-i", p.B.Name, "-tcp", "-port", "0", "-ethertype", "0x88b5", "-json", "-duration", "120s")
	s := newFrameSender(t, p.A, p.B)
	const n = 100
	for i := range n {
		s.send(t, s.syn(i%2 == 1, uint16(30000+i), 443))
		s.send(t, rawEther(0x88b5, i))
		s.send(t, rawEther(0x88b6, i)) // not taken
		s.send(t, s.echo(false, 1, uint16(i)))
	}
	// Wait for the SYNs and 0x88b5 frames the veth did not drop.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got float64
		for _, iv := range recv.byType("interval") {
			got += num(iv, "Proto", "TCPSYN") + num(iv, "Proto", "Raw", "0x88b5")
		}
		if got >= 2*n || uint64(got)+vethDrops(t, p) >= 2*n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s %v of %d SYNs and 0x88b5 frames counted: %s", got, 2*n, recv.errText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	recv.stop(t)
	sums := recv.byType("summary")
	if len(sums) != 1 {
		t.Fatalf("%d summary lines", len(sums))
	}
	sum := sums[0]
	if num(sum, "Proto", "TCPSYN") == 0 || num(sum, "Proto", "Raw", "0x88b5") == 0 {
		t.Errorf("SYN %v, 0x88b5 %v: want both", num(sum, "Proto", "TCPSYN"), num(sum, "Proto", "Raw", "0x88b5"))
	}
	icmp := num(sum, "Proto", "ICMPEchoRequest") + num(sum, "Proto", "ICMPOther")
	if other := num(sum, "Proto", "Raw", "0x88b6"); other != 0 || icmp != 0 || num(sum, "Other") != 0 {
		t.Errorf("0x88b6 %v, ICMP %v, other %v reached the socket: want none", other, icmp, num(sum, "Other"))
	}
}

// TestRecvCountsGenModes: what xdpgen's tcp-syn, icmp-echo (IPv4 and
// IPv6) and raw modes send, xdprecv -all counts by kind and flow, every
// checksum good.
func TestRecvCountsGenModes(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	recv := startJSON(t, b, "xdprecv", "-i", p.B.Name, "-all", "-json", "-duration", "120s")
	drops0 := vethDrops(t, p)
	v4, v6 := p.B.IPv4.Addr().String(), p.B.IPv6.Addr().String()
	runs := []struct {
		args  []string
		count uint64
	}{
		{[]string{"-mode", "tcp-syn", "-dst", v4, "-flows", "8", "-dport", "443"}, 400},
		{[]string{"-mode", "icmp-echo", "-dst", v4, "-flows", "4"}, 300},
		{[]string{"-mode", "icmp-echo", "-dst", v6, "-flows", "2", "-size", "78"}, 200},
		{[]string{"-mode", "raw", "-dst", v4, "-ethertype", "0x88b6"}, 100},
	}
	var sent uint64
	for _, r := range runs {
		args := append([]string{"-i", p.A.Name, "-rate", "20k", "-count", fmt.Sprint(r.count), "-quiet"}, r.args...)
		stdout, stderr, code := runIn(t, a, 60*time.Second, "xdpgen", args...)
		if code != 0 {
			t.Fatalf("xdpgen %v: exit %d: %s", args, code, stderr)
		}
		var gs struct{ Sent uint64 }
		if err := cli.ParseSummary(stdout, &gs); err != nil || gs.Sent != r.count {
			t.Fatalf("xdpgen %v: sent %d of %d (%v)", args, gs.Sent, r.count, err)
		}
		sent += gs.Sent
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got float64
		for _, iv := range recv.byType("interval") {
			got += num(iv, "Packets")
		}
		if uint64(got)+vethDrops(t, p)-drops0 >= sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the intervals count %v of %d frames sent: %s", got, sent, recv.errText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	recv.stop(t)
	sums := recv.byType("summary")
	if len(sums) != 1 {
		t.Fatalf("%d summary lines", len(sums))
	}
	sum := sums[0]
	drops := vethDrops(t, p) - drops0
	for _, c := range []struct {
		key  []string
		want float64
	}{
		{[]string{"Proto", "TCPSYN"}, 400},
		{[]string{"Proto", "ICMPEchoRequest"}, 300},
		{[]string{"Proto", "ICMPv6EchoRequest"}, 200},
		{[]string{"Proto", "Raw", "0x88b6"}, 100},
	} {
		if v := num(sum, c.key...); v > c.want || v == 0 || drops == 0 && v != c.want {
			t.Errorf("%v: %v received, %v sent (veth drops %d)", c.key, v, c.want, drops)
		}
	}
	if drops == 0 && (num(sum, "Proto", "TCPSYNFlows") != 8 || num(sum, "Proto", "ICMPEchoFlows") != 6) {
		t.Errorf("flows: SYN %v (want 8), echo %v (want 4 + 2)", num(sum, "Proto", "TCPSYNFlows"), num(sum, "Proto", "ICMPEchoFlows"))
	}
	// ICMPOther is not among them: the kernel's own ICMPv6 (MLD,
	// neighbour discovery) reaches xdprecv too with -all.
	for _, k := range []string{"TCPBadCsum", "ICMPBadCsum", "TCPOther", "TCPSYNACK"} {
		if num(sum, "Proto", k) != 0 {
			t.Errorf("%s %v: want 0", k, num(sum, "Proto", k))
		}
	}
}
