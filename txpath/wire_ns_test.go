package txpath_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/txpath"
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// capture opens an AF_PACKET socket on the B end of e's pair.
func (e *env) capture(t *testing.T) int {
	t.Helper()
	var fd int
	err := e.b.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return os.NewSyscallError("socket(AF_PACKET)", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			return os.NewSyscallError("setsockopt(SO_RCVBUFFORCE)", err)
		}
		tv := unix.Timeval{Sec: 2}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: e.p.B.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// wireUDP reads captured frames until it has n UDP datagrams to port 9000
// and returns, for each, the checksum field and whether the checksum
// verifies; partial reports whether the field holds the pseudo-header sum
// (an unfinished offload). Each datagram read is counted in seen (if not
// nil), which the sender's window can wait for.
func wireUDP(fd, n int, seen *atomic.Int64) (ok, partial int, err error) {
	buf := make([]byte, 65536)
	for got := 0; got < n; {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			// A socket with SO_RCVTIMEO is not restarted after a signal
			// handler, and the Go runtime preempts with signals.
			continue
		}
		if err != nil {
			return ok, partial, fmt.Errorf("after %d datagrams: %w", got, err)
		}
		f := buf[:m]
		var l4 int
		var pseudo uint32
		switch binary.BigEndian.Uint16(f[12:]) {
		case 0x0800:
			if f[23] != 17 {
				continue
			}
			l4 = 14 + int(f[14]&15)*4
			ulen := int(binary.BigEndian.Uint16(f[16:])) - (l4 - 14)
			pseudo = csum.PseudoHeaderIPv4([4]byte(f[26:30]), [4]byte(f[30:34]), 17, uint16(ulen))
		case 0x86dd:
			if f[20] != 17 {
				continue
			}
			l4 = 54
			pseudo = csum.PseudoHeaderIPv6([16]byte(f[22:38]), [16]byte(f[38:54]), 17, uint32(binary.BigEndian.Uint16(f[18:])))
		default:
			continue
		}
		if binary.BigEndian.Uint16(f[l4+2:]) != 9000 {
			continue
		}
		got++
		if seen != nil {
			seen.Add(1)
		}
		seg := f[l4 : l4+int(binary.BigEndian.Uint16(f[l4+4:]))]
		if csum.Finish(csum.Sum(seg, pseudo)) == 0 {
			ok++
		}
		if binary.BigEndian.Uint16(seg[6:]) == csum.Fold(pseudo) {
			partial++
		}
	}
	return ok, partial, nil
}

// TestOffloadWire checks the bytes on the wire. With XDP_UMEM_TX_SW_CSUM
// the kernel completes the requested checksum before the frame leaves:
// every datagram must verify. Without it veth passes the frame on with the
// checksum unfinished (CHECKSUM_PARTIAL, which the receiver's kernel
// accepts): every field must hold the pseudo-header sum we pre-filled.
func TestOffloadWire(t *testing.T) {
	const n = 2000
	for _, sw := range []bool{true, false} {
		for _, fam := range []string{"ipv4", "ipv6"} {
			name := fam + "/sw-csum"
			if !sw {
				name = fam + "/partial"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, 1500)
				fd := e.capture(t)
				before := e.csumErrors(t)
				e.send(t, run{policy: txpath.Offload, meta: true, swCsum: sw, n: n, v6: fam == "ipv6"})
				ok, partial, err := wireUDP(fd, n, nil)
				if err != nil {
					t.Fatal(err)
				}
				if sw && ok != n {
					t.Errorf("%d of %d datagrams verify on the wire", ok, n)
				}
				if !sw && partial != n {
					t.Errorf("%d of %d datagrams carry the pre-filled pseudo-header sum (%d verify)", partial, n, ok)
				}
				if after := e.csumErrors(t); after != before {
					t.Errorf("checksum errors at the receiver: %d -> %d", before, after)
				}
				t.Logf("%d datagrams: %d verify, %d carry the pseudo-header sum", n, ok, partial)
			})
		}
	}
}
