package xdpprog

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
	"golang.org/x/sys/unix"
)

// frameMagic marks the test's frames on the wire; an index follows it.
const frameMagic = 0x58444b46

// TestFilterReplyFieldsOnVeth sends the reply filters' frames over a veth
// pair to the program attached natively to the far end, with an unbound
// AF_XDP socket in its XSKMAP: a frame the program redirects is dropped
// there, a frame it passes reaches the kernel, where a packet socket sees
// it. Then the socket is unregistered and every frame must arrive, which
// shows that all of them were sent and would have been seen.
func TestFilterReplyFieldsOnVeth(t *testing.T) {
	nsA, nsB, pr := pair(t, nil)
	tx := packetSocket(t, nsA, pr.A.Index)
	rx := packetSocket(t, nsB, pr.B.Index)
	for fi, tc := range replyFilters() {
		var p *Program
		err := nsB.Do(func() error {
			var err error
			p, err = Load(&Config{Filter: tc.f})
			if err != nil {
				return err
			}
			if _, err = p.Attach(pr.B.Index, ModeNative); err != nil {
				p.Close()
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatalf("filter %d: %v", fi, err)
		}
		if err := p.Register(0, unboundXSK(t)); err != nil {
			t.Fatal(err)
		}
		frames := make([][]byte, len(tc.cases))
		for i, c := range tc.cases {
			b := c.frame.bytes()
			copy(b[0:6], pr.B.MAC)
			copy(b[6:12], pr.A.MAC)
			b = binary.BigEndian.AppendUint32(b, frameMagic)
			frames[i] = binary.BigEndian.AppendUint32(b, uint32(fi<<16|i))
		}
		seen := exchange(t, tx, rx, pr.A.Index, frames, fi)
		for i, c := range tc.cases {
			if seen[i] == c.redirect {
				t.Errorf("filter %+v: %s: reached the kernel=%v, want %v", *tc.f, c.name, seen[i], !c.redirect)
			}
		}
		if err := p.Unregister(0); err != nil {
			t.Fatal(err)
		}
		seen = exchange(t, tx, rx, pr.A.Index, frames, fi)
		for i, c := range tc.cases {
			if !seen[i] {
				t.Errorf("filter %+v: %s: with no socket registered the frame did not reach the kernel", *tc.f, c.name)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// packetSocket opens an AF_PACKET socket for every EtherType on ifindex
// inside ns, with a receive timeout.
func packetSocket(t *testing.T, ns *vethns.NS, ifindex int) int {
	t.Helper()
	fd := -1
	err := ns.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return os.NewSyscallError("socket(AF_PACKET)", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
			return os.NewSyscallError("bind", err)
		}
		tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// rounds counts exchanges.
var rounds uint32

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// exchange sends frames, then a sentinel that every filter passes, and
// reads what reaches the kernel until the sentinel arrives: the veth
// keeps order, so by then every passed frame has been seen.
func exchange(t *testing.T, tx, rx, ifindex int, frames [][]byte, fi int) []bool {
	t.Helper()
	to := &unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
	for _, f := range frames {
		to.Protocol = htons(binary.BigEndian.Uint16(f[12:]))
		if err := unix.Sendto(tx, f, 0, to); err != nil {
			t.Fatalf("sendto: %v", err)
		}
	}
	sentinel := append(ethFrame(0x88b6).bytes(), 0, 0, 0, 0, 0, 0, 0, 0)
	copy(sentinel[6:12], frames[0][6:12])
	copy(sentinel[0:6], frames[0][0:6])
	rounds++
	id := 0x80000000 | rounds // a late sentinel of an earlier round is not this one
	binary.BigEndian.PutUint32(sentinel[len(sentinel)-8:], frameMagic)
	binary.BigEndian.PutUint32(sentinel[len(sentinel)-4:], id)
	to.Protocol = htons(0x88b6)
	seen := make([]bool, len(frames))
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for sends := 0; time.Now().Before(deadline); {
		if sends < 20 {
			if err := unix.Sendto(tx, sentinel, 0, to); err != nil {
				t.Fatalf("sendto sentinel: %v", err)
			}
			sends++
		}
		for {
			n, _, err := unix.Recvfrom(rx, buf, 0)
			if err != nil {
				break // timeout: send the sentinel again
			}
			if n < 8 || binary.BigEndian.Uint32(buf[n-8:]) != frameMagic {
				continue
			}
			got := binary.BigEndian.Uint32(buf[n-4:])
			if got == id {
				return seen
			}
			if got < 0x80000000 && int(got>>16) == fi && int(got&0xffff) < len(frames) {
				seen[got&0xffff] = true
			}
		}
	}
	t.Fatalf("filter %d: the sentinel frame did not arrive", fi)
	return nil
}
