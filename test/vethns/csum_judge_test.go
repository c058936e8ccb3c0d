package vethns_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestCsumJudge makes the Linux stack an independent judge of package csum:
// frames whose IPv4 header, UDP and TCP checksums come from csum are sent
// from namespace a through a raw packet socket on one veth end to kernel
// sockets in namespace b. The peer's checksum-error counters must not move
// for good checksums and must move by exactly the number of frames sent
// with a deliberately wrong one, which shows the judge is watching (veth
// does not mark packet-socket frames as checksum-verified).
//
// UDP verifies the checksum lazily, when the application receives (or at
// once for a socket with a filter), so the UDP cases read from the socket:
// good datagrams must arrive with their payload, and bad ones are counted
// in Udp:InCsumErrors while recvmsg skips them on its way to a good marker
// datagram sent after them.
func TestCsumJudge(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	tx := newJudgeSender(t, p.A)

	for _, v6 := range []bool{false, true} {
		name := "UDP4"
		if v6 {
			name = "UDP6"
		}
		t.Run(name, func(t *testing.T) { judgeUDP(t, p, tx, v6) })
	}
	t.Run("TCP4", func(t *testing.T) { judgeTCP(t, p, tx, false) })
	t.Run("TCP6", func(t *testing.T) { judgeTCP(t, p, tx, true) })
	t.Run("IPv4Header", func(t *testing.T) { judgeIPv4Header(t, p, tx) })
}

// judgeSender is a send-only AF_PACKET socket on a veth end (protocol 0, so
// it queues nothing it sees).
type judgeSender struct {
	fd   int
	addr unix.SockaddrLinklayer
}

func newJudgeSender(t *testing.T, l *vethns.Link) *judgeSender {
	t.Helper()
	s := &judgeSender{fd: -1}
	err := l.NS.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket(AF_PACKET)", err)
		}
		s.fd = fd
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Close(s.fd); err != nil {
			t.Errorf("close packet socket: %v", err)
		}
	})
	s.addr = unix.SockaddrLinklayer{Ifindex: l.Index, Halen: 6}
	return s
}

func (s *judgeSender) send(t *testing.T, frame []byte) {
	t.Helper()
	a := s.addr
	a.Protocol = judgeHtons(binary.BigEndian.Uint16(frame[12:]))
	if err := unix.Sendto(s.fd, frame, 0, &a); err != nil {
		t.Fatalf("sendto: %v", err)
	}
}

func judgeHtons(v uint16) uint16 { return v<<8 | v>>8 }

// judgeEthIP writes the Ethernet and IP headers of a frame from p.A to p.B
// carrying an L4 segment of l4len bytes and returns the frame and the
// offset of the segment. The IPv4 header checksum is left zero.
func judgeEthIP(p *vethns.Pair, v6 bool, proto uint8, l4len int) ([]byte, int) {
	f := make([]byte, 14, 14+40+l4len)
	copy(f[0:6], p.B.MAC)
	copy(f[6:12], p.A.MAC)
	if v6 {
		binary.BigEndian.PutUint16(f[12:], 0x86dd)
		h := make([]byte, 40)
		binary.BigEndian.PutUint32(h[0:], 6<<28)
		binary.BigEndian.PutUint16(h[4:], uint16(l4len))
		h[6], h[7] = proto, 64
		s, d := p.A.IPv6.Addr().As16(), p.B.IPv6.Addr().As16()
		copy(h[8:], s[:])
		copy(h[24:], d[:])
		f = append(f, h...)
	} else {
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		h := make([]byte, 20)
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+l4len))
		binary.BigEndian.PutUint16(h[4:], uint16(rand.Uint32()))
		h[6] = 0x40 // DF
		h[8], h[9] = 64, proto
		s, d := p.A.IPv4.Addr().As4(), p.B.IPv4.Addr().As4()
		copy(h[12:], s[:])
		copy(h[16:], d[:])
		f = append(f, h...)
	}
	off := len(f)
	return append(f, make([]byte, l4len)...), off
}

// judgeUDPFrame builds a UDP datagram the way the transmit path will:
// CopyAndSum copies the payload into the frame and sums it, then the UDP
// header and the pseudo-header are added and FinishUDP stores the result.
// The IPv4 header checksum comes from csum.IPv4Header.
func judgeUDPFrame(p *vethns.Pair, v6 bool, sport, dport uint16, payload []byte) []byte {
	f, off := judgeEthIP(p, v6, csum.ProtoUDP, 8+len(payload))
	u := f[off:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	var s uint32
	if v6 {
		s = csum.PseudoHeaderIPv6(p.A.IPv6.Addr().As16(), p.B.IPv6.Addr().As16(), csum.ProtoUDP, uint32(len(u)))
	} else {
		s = csum.PseudoHeaderIPv4(p.A.IPv4.Addr().As4(), p.B.IPv4.Addr().As4(), csum.ProtoUDP, uint16(len(u)))
		binary.BigEndian.PutUint16(f[24:], csum.IPv4Header(f[14:34]))
	}
	s = csum.CopyAndSum(u[8:], payload, s)
	s = csum.Sum(u[:8], s)
	binary.BigEndian.PutUint16(u[6:], csum.FinishUDP(s))
	return f
}

// judgeCorrupt makes the 16-bit checksum at f[off:] wrong, never 0 (which
// would mean "no checksum" to UDP over IPv4) and never its ones'-complement
// twin.
func judgeCorrupt(f []byte, off int) {
	c := binary.BigEndian.Uint16(f[off:]) ^ 0x5a5a
	if c == 0 || c == 0xffff {
		c = 0x1234
	}
	binary.BigEndian.PutUint16(f[off:], c)
}

// judgeCounters reads b's counters, failing t if a key is missing.
func judgeCounters(t *testing.T, ns *vethns.NS, keys ...string) map[string]int64 {
	t.Helper()
	m, err := ns.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Fatalf("counter %s missing", k)
		}
	}
	return m
}

// judgeWait polls ns's counters until cond holds (bounded: 3 s) and
// returns the last reading.
func judgeWait(t *testing.T, ns *vethns.NS, keys []string, cond func(m map[string]int64) bool) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		m := judgeCounters(t, ns, keys...)
		if cond(m) || time.Now().After(deadline) {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func judgeUDP(t *testing.T, p *vethns.Pair, tx *judgeSender, v6 bool) {
	group := "Udp"
	dst := p.B.AddrPort4(0)
	lens := []int{0, 1, 2, 17, 255, 1000, 1471}
	if v6 {
		group, dst = "Udp6", p.B.AddrPort6(0)
		lens = []int{0, 1, 2, 17, 255, 1000, 1451}
	}
	conn, err := p.B.NS.ListenUDP(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dport := uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	keys := []string{group + ":InCsumErrors", group + ":InErrors", group + ":InDatagrams"}
	r := rand.New(rand.NewPCG(uint64(len(group)), 42))

	recv := func(want []byte) error {
		buf := make([]byte, 2048)
		if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
			return err
		}
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) != string(want) {
			return fmt.Errorf("received %d bytes, want %d (or different content)", n, len(want))
		}
		return nil
	}

	// Good checksums: every datagram arrives intact, no error counter moves.
	before := judgeCounters(t, p.B.NS, keys...)
	for i, n := range lens {
		payload := make([]byte, n)
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		tx.send(t, judgeUDPFrame(p, v6, uint16(40000+i), dport, payload))
		if err := recv(payload); err != nil {
			t.Fatalf("good datagram %d (%d bytes): %v", i, n, err)
		}
	}
	after := judgeCounters(t, p.B.NS, keys...)
	if d := after[keys[2]] - before[keys[2]]; d != int64(len(lens)) {
		t.Errorf("%s delta %d, want %d", keys[2], d, len(lens))
	}
	for _, k := range keys[:2] {
		if d := after[k] - before[k]; d != 0 {
			t.Errorf("good checksums: %s moved by %d", k, d)
		}
	}

	// Wrong checksums: recvmsg drops and counts each on its way to the
	// good marker datagram sent last.
	before = after
	const bad = 5
	for i := 0; i < bad; i++ {
		f := judgeUDPFrame(p, v6, uint16(41000+i), dport, []byte("wrong checksum"))
		judgeCorrupt(f, len(f)-len("wrong checksum")-2)
		tx.send(t, f)
	}
	marker := []byte("marker")
	tx.send(t, judgeUDPFrame(p, v6, 41999, dport, marker))
	if err := recv(marker); err != nil {
		t.Fatalf("marker after bad datagrams: %v", err)
	}
	after = judgeWait(t, p.B.NS, keys, func(m map[string]int64) bool { return m[keys[0]]-before[keys[0]] >= bad })
	if d := after[keys[0]] - before[keys[0]]; d != bad {
		t.Errorf("wrong checksums: %s moved by %d, want %d", keys[0], d, bad)
	}
	if d := after[keys[1]] - before[keys[1]]; d != bad {
		t.Errorf("wrong checksums: %s moved by %d, want %d", keys[1], d, bad)
	}
	t.Logf("%s: %d good datagrams (payload 0..%d bytes) accepted, %d with a wrong checksum counted in %s",
		group, len(lens), lens[len(lens)-1], bad, keys[0])
}

// judgeSYN builds a TCP SYN (with an odd-length payload, as TCP Fast Open
// data would be, to exercise the odd tail) and fills its checksums with
// csum.FillFrame.
func judgeSYN(t *testing.T, p *vethns.Pair, v6 bool, sport, dport uint16, payload int) []byte {
	f, off := judgeEthIP(p, v6, csum.ProtoTCP, 20+payload)
	h := f[off:]
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint32(h[4:], rand.Uint32())
	h[12] = 5 << 4
	h[13] = 0x02 // SYN
	binary.BigEndian.PutUint16(h[14:], 65535)
	for i := 20; i < len(h); i++ {
		h[i] = byte(i)
	}
	if err := csum.FillFrame(f); err != nil {
		t.Fatal(err)
	}
	return f
}

func judgeTCP(t *testing.T, p *vethns.Pair, tx *judgeSender, v6 bool) {
	network, laddr := "tcp4", p.B.AddrPort4(0)
	if v6 {
		network, laddr = "tcp6", p.B.AddrPort6(0)
	}
	var ln net.Listener
	if err := p.B.NS.Do(func() error {
		var err error
		ln, err = net.Listen(network, laddr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dport := uint16(ln.Addr().(*net.TCPAddr).Port)
	keys := []string{"Tcp:InCsumErrors", "Tcp:InErrs", "Tcp:InSegs", "Tcp:OutSegs"}

	// Good SYNs: the listener answers each with a SYN-ACK (a's kernel
	// resets them: it has no socket for them), no error counter moves.
	const good = 6
	before := judgeCounters(t, p.B.NS, keys...)
	for i := 0; i < good; i++ {
		tx.send(t, judgeSYN(t, p, v6, uint16(42000+i), dport, []int{0, 1, 3, 0, 7, 0}[i]))
	}
	after := judgeWait(t, p.B.NS, keys, func(m map[string]int64) bool { return m["Tcp:OutSegs"]-before["Tcp:OutSegs"] >= good })
	if d := after["Tcp:OutSegs"] - before["Tcp:OutSegs"]; d < good {
		t.Errorf("good SYNs: Tcp:OutSegs moved by %d, want at least %d SYN-ACKs", d, good)
	}
	if d := after["Tcp:InSegs"] - before["Tcp:InSegs"]; d < good {
		t.Errorf("good SYNs: Tcp:InSegs moved by %d, want at least %d", d, good)
	}
	for _, k := range keys[:2] {
		if d := after[k] - before[k]; d != 0 {
			t.Errorf("good checksums: %s moved by %d", k, d)
		}
	}

	// Wrong checksums: each SYN counted in Tcp:InCsumErrors.
	const bad = 4
	before = judgeCounters(t, p.B.NS, keys...)
	for i := 0; i < bad; i++ {
		f := judgeSYN(t, p, v6, uint16(43000+i), dport, i)
		off := 14 + 20
		if v6 {
			off = 14 + 40
		}
		judgeCorrupt(f, off+16)
		tx.send(t, f)
	}
	after = judgeWait(t, p.B.NS, keys, func(m map[string]int64) bool { return m[keys[0]]-before[keys[0]] >= bad })
	if d := after[keys[0]] - before[keys[0]]; d != bad {
		t.Errorf("wrong checksums: %s moved by %d, want %d", keys[0], d, bad)
	}
	t.Logf("TCP/%s: %d good SYNs answered, %d with a wrong checksum counted in Tcp:InCsumErrors", network, good, bad)
}

// judgeIPv4Header: a wrong IPv4 header checksum is counted in
// IpExt:InCsumErrors (and Ip:InHdrErrors); a right one is not.
func judgeIPv4Header(t *testing.T, p *vethns.Pair, tx *judgeSender) {
	keys := []string{"IpExt:InCsumErrors", "Ip:InHdrErrors", "Ip:InReceives"}
	conn, err := p.B.NS.ListenUDP(p.B.AddrPort4(0))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dport := uint16(conn.LocalAddr().(*net.UDPAddr).Port)

	const n = 4
	before := judgeCounters(t, p.B.NS, keys...)
	for i := 0; i < n; i++ {
		tx.send(t, judgeUDPFrame(p, false, 44000, dport, []byte("good header")))
	}
	after := judgeWait(t, p.B.NS, keys, func(m map[string]int64) bool { return m["Ip:InReceives"]-before["Ip:InReceives"] >= n })
	if d := after["Ip:InReceives"] - before["Ip:InReceives"]; d < n {
		t.Errorf("Ip:InReceives moved by %d, want at least %d", d, n)
	}
	for _, k := range keys[:2] {
		if d := after[k] - before[k]; d != 0 {
			t.Errorf("good headers: %s moved by %d", k, d)
		}
	}
	before = after
	for i := 0; i < n; i++ {
		f := judgeUDPFrame(p, false, 44001, dport, []byte("bad header"))
		judgeCorrupt(f, 24)
		tx.send(t, f)
	}
	after = judgeWait(t, p.B.NS, keys, func(m map[string]int64) bool { return m[keys[0]]-before[keys[0]] >= n })
	for _, k := range keys[:2] {
		if d := after[k] - before[k]; d != n {
			t.Errorf("wrong header checksums: %s moved by %d, want %d", k, d, n)
		}
	}
	// Only the good datagrams reached the socket.
	buf := make([]byte, 64)
	for i := 0; ; i++ {
		if err := conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		m, _, err := conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if i != n {
				t.Errorf("socket received %d datagrams, want %d", i, n)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:m]) != "good header" || i >= n {
			t.Fatalf("unexpected datagram %q (#%d)", buf[:m], i)
		}
	}
}
