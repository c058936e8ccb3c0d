package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestHairpinFlag: fwd with -o equal to -i and the same queue is the
// hairpin; another interface or another queue is not.
func TestHairpinFlag(t *testing.T) {
	saved := o
	t.Cleanup(func() { o = saved })
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"-m", "fwd", "-i", "lo", "-o", "lo", "--dst-mac", "02:00:00:00:00:01"}, true},
		{[]string{"-m", "fwd", "-i", "lo", "-o", "lo", "-q", "1", "--out-queue", "1", "--dst-mac", "02:00:00:00:00:01"}, true},
		{[]string{"-m", "fwd", "-i", "lo", "-o", "lo", "--out-queue", "1", "--dst-mac", "02:00:00:00:00:01"}, false},
		{[]string{"-m", "fwd", "-i", "lo", "-o", "eth9", "--dst-mac", "02:00:00:00:00:01"}, false},
		{[]string{"-m", "rxdrop", "-i", "lo"}, false},
	} {
		o = options{}
		parseArgs(tc.args)
		if got := hairpin(); got != tc.want {
			t.Errorf("%v: hairpin() = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// capture counts, on one link of a namespace, the IPv4 UDP frames to
// port that arrive (AF_PACKET, not outgoing ones), split by whether their
// Ethernet addresses are dst and src. It shares no code with the
// forwarders it judges.
type capture struct {
	fd       int
	mu       sync.Mutex
	ok, bad  int
	badFirst []byte
	done     chan struct{}
	stopFn   func() // ends the capture and waits for its reader
}

func newCapture(t *testing.T, l *vethns.Link, port uint16, dst, src net.HardwareAddr) *capture {
	t.Helper()
	c := &capture{fd: -1, done: make(chan struct{})}
	// ETH_P_IP in network byte order, as AF_PACKET takes it: only
	// frames received by the link (an ETH_P_ALL socket would also see
	// the ones sent out of it).
	proto := int(uint16(unix.ETH_P_IP)>>8 | uint16(unix.ETH_P_IP&0xff)<<8)
	err := l.NS.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			return err
		}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000}); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: l.Index})
	})
	if err != nil {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
		t.Fatalf("AF_PACKET capture on %s: %v", l.Name, err)
	}
	stop := make(chan struct{})
	go func() {
		defer close(c.done)
		buf := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(c.fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			f := buf[:n]
			// Ethernet, IPv4 without options (the generator's), UDP.
			if n < 14+20+8 || f[14]>>4 != 4 || f[23] != 17 {
				continue
			}
			ihl := int(f[14]&15) * 4
			if n < 14+ihl+8 || binary.BigEndian.Uint16(f[14+ihl+2:]) != port {
				continue
			}
			c.mu.Lock()
			if bytes.Equal(f[0:6], dst) && bytes.Equal(f[6:12], src) {
				c.ok++
			} else {
				c.bad++
				if c.badFirst == nil {
					c.badFirst = append([]byte(nil), f[:12]...)
				}
			}
			c.mu.Unlock()
		}
	}()
	c.stopFn = sync.OnceFunc(func() {
		close(stop)
		<-c.done
	})
	t.Cleanup(func() {
		c.stopFn()
		unix.Close(c.fd)
	})
	return c
}

// counts returns the frames seen so far.
func (c *capture) counts() (ok, bad int, first []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok, c.bad, c.badFirst
}

// TestHairpin runs fwd as a hairpin (-o equal to -i), in xdpkitbench and
// in the C reference: the generator's frames must come back on the
// generator's own link, every one with the Ethernet addresses swapped
// (destination the generator's link, source the forwarder's), as an
// AF_PACKET capture on the generator's link sees them.
func TestHairpin(t *testing.T) {
	vethns.Require(t)
	dir := t.TempDir()
	bins := map[string]string{"xdpkit": buildSelf(t, dir), "c": buildC(t, dir)}
	cbin := bins["c"]
	const n, port = 20000, 9000
	for _, name := range []string{"xdpkit", "c"} {
		t.Run(name, func(t *testing.T) {
			a, b := vethns.NewNS(t), vethns.NewNS(t)
			p := vethns.NewPair(t, a, b, nil)
			capt := newCapture(t, p.A, port, p.A.MAC, p.B.MAC)
			stop := make(chan struct{})
			fwd := background(t, b, stop, bins[name], "-m", "fwd", "-i", p.B.Name, "-o", p.B.Name,
				"--dst-mac", p.A.MAC.String(), "-d", "20")
			run(t, a, cbin, "-m", "txonly", "-i", p.A.Name, "-s", "100", "--dst-mac", p.B.MAC.String(),
				"--src-ip", p.B.IPv4.Addr().String(), "--dst-ip", p.A.IPv4.Addr().String(),
				"--dst-port", strconv.Itoa(port), "-n", strconv.Itoa(n), "--rate", "50000", "-d", "10")
			// Wait until the forwarder sent what it received (bounded).
			for dl := time.Now().Add(5 * time.Second); time.Now().Before(dl); time.Sleep(50 * time.Millisecond) {
				if ok, bad, _ := capt.counts(); ok+bad >= n {
					break
				}
			}
			close(stop)
			f := fwd()
			sent := num(f, "tx_completed")
			// The last frames on the way back (bounded).
			for dl := time.Now().Add(5 * time.Second); time.Now().Before(dl); time.Sleep(20 * time.Millisecond) {
				if ok, bad, _ := capt.counts(); float64(ok+bad) >= sent {
					break
				}
			}
			capt.stopFn()
			ok, bad, first := capt.counts()
			t.Logf("%s hairpin: received %v, completed %v; back on the generator's link: %d swapped, %d not (first: % x)",
				name, num(f, "frames"), sent, ok, bad, first)
			if f["hairpin"] != true || num(f, "frames") == 0 || sent == 0 {
				t.Errorf("%s fwd -o %s: %v, want a hairpin that forwarded frames", name, p.B.Name, f)
			}
			if bad != 0 {
				t.Errorf("%d frames came back without the addresses swapped (first: % x), want none", bad, first)
			}
			if float64(ok) < sent*9/10 || float64(ok) > sent+100 {
				t.Errorf("%d frames came back with the addresses swapped, the forwarder completed %v", ok, sent)
			}
		})
	}
}
