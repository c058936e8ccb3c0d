package xdpnet_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
)

// frame builds an Ethernet + IP + UDP frame from src to dst with payload
// and right checksums.
func frame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) []byte {
	var b []byte
	b = append(b, dstMAC...)
	b = append(b, srcMAC...)
	ul := 8 + len(payload)
	var pseudo uint32
	if src.Addr().Is4() {
		b = binary.BigEndian.AppendUint16(b, 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+ul))
		ip[8], ip[9] = 64, 17
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], csum.IPv4Header(ip))
		b = append(b, ip...)
		pseudo = csum.PseudoHeaderIPv4(s, d, 17, uint16(ul))
	} else {
		b = binary.BigEndian.AppendUint16(b, 0x86dd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(ul))
		ip[6], ip[7] = 17, 64
		s, d := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		b = append(b, ip...)
		pseudo = csum.PseudoHeaderIPv6(s, d, 17, uint32(ul))
	}
	u := make([]byte, 8, ul)
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(ul))
	u = append(u, payload...)
	binary.BigEndian.PutUint16(u[6:], csum.FinishUDP(csum.Sum(u, pseudo)))
	return append(b, u...)
}

// spoil returns one of the ways to break a good frame (l3 is the IP
// header's offset), and its name.
func spoil(r *rand.Rand, good []byte, v6 bool) ([]byte, string) {
	b := bytes.Clone(good)
	l4 := 14 + 20
	if v6 {
		l4 = 14 + 40
	}
	switch k := r.IntN(8); k {
	case 0: // truncated anywhere in the headers
		return b[:r.IntN(l4+8)], "truncated"
	case 1: // UDP length beyond the datagram
		binary.BigEndian.PutUint16(b[l4+4:], uint16(len(b)-l4+1+r.IntN(100)))
		return b, "udp length long"
	case 2: // UDP length below 8
		binary.BigEndian.PutUint16(b[l4+4:], uint16(r.IntN(8)))
		return b, "udp length short"
	case 3: // a wrong UDP checksum (never 0: that is "none" over IPv4)
		c := binary.BigEndian.Uint16(b[l4+6:])
		binary.BigEndian.PutUint16(b[l4+6:], c^uint16(1+r.IntN(0xfffe)))
		if binary.BigEndian.Uint16(b[l4+6:]) == 0 {
			b[l4+6] = 1
		}
		return b, "udp checksum"
	case 4: // a flipped payload byte (the checksum no longer matches)
		if len(b) > l4+8 {
			b[l4+8+r.IntN(len(b)-l4-8)] ^= 0x5a
			return b, "payload flipped"
		}
		return b[:l4], "truncated"
	case 5: // IP length beyond the frame
		if v6 {
			binary.BigEndian.PutUint16(b[14+4:], uint16(len(b)))
		} else {
			binary.BigEndian.PutUint16(b[14+2:], uint16(len(b)+1+r.IntN(100)))
		}
		return b, "ip length long"
	case 6: // a first fragment whose rest never comes (the kernel's: it
		// never completes, so nothing reaches the conn)
		if v6 {
			fr := append(bytes.Clone(b[:14+40]), 17, 0, 0, 1, 0, 0, 0, 7) // more fragments
			fr[14+6] = 44
			binary.BigEndian.PutUint16(fr[14+4:], uint16(len(b)-14-40+8))
			return append(fr, b[14+40:]...), "fragment"
		}
		binary.BigEndian.PutUint16(b[14+6:], 0x2000) // MF
		binary.BigEndian.PutUint16(b[14+10:], 0)
		binary.BigEndian.PutUint16(b[14+10:], csum.IPv4Header(b[14:]))
		return b, "fragment"
	default: // a wrong IPv4 header checksum, or an IPv6 version nibble
		if v6 {
			b[14] = 0x40
			return b, "ip version"
		}
		b[14+10] ^= 0x10
		return b, "ip checksum"
	}
}

// partialAlike reports whether the frame b passes as a datagram whose
// UDP checksum a sender offloaded (csum.Partial): its field equals the
// pseudo-header sum. The conn accepts those on veth, whatever the payload
// (see the package doc), so a spoiled frame that is one is not broken.
// It happens by chance once in 65535 wrong checksums.
func partialAlike(b []byte) bool {
	if len(b) < 14 {
		return false
	}
	v, err := csum.VerifyTransport(b[14:])
	return err == nil && v == csum.Partial
}

// collision returns a payload that starts with prefix and makes the UDP
// checksum of its datagram from src to dst equal the pseudo-header sum,
// so that the datagram with any payload byte flipped passes as Partial.
func collision(t *testing.T, dstMAC, srcMAC net.HardwareAddr, src, dst netip.AddrPort, prefix string) []byte {
	for x := 0; x < 1<<16; x++ {
		payload := append([]byte(prefix), byte(x>>8), byte(x))
		b := frame(dstMAC, srcMAC, src, dst, payload)
		b[len(b)-1] ^= 0x5a
		if partialAlike(b) {
			return payload
		}
	}
	t.Fatalf("no payload %q + 2 bytes whose checksum is the pseudo-header sum", prefix)
	return nil
}

// TestMalformed: a flood of broken frames (truncated headers, bad
// lengths, bad checksums, fragments that never complete) sent from a
// packet socket in the client's namespace, with good datagrams among
// them: ReadFrom returns exactly the good ones, in order, and nothing
// else. A spoiled frame that passes as a partial checksum is not sent
// (the conn accepts it by design); one good datagram is chosen so that
// every flipped payload byte of it would.
func TestMalformed(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			bd := newBed(t, v6, nil)
			src := bd.p.B.AddrPort4(4000)
			if v6 {
				src = bd.p.B.AddrPort6(4000)
			}
			var fd int
			err := bd.b.Do(func() error {
				var err error
				fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			sa := &unix.SockaddrLinklayer{Ifindex: bd.p.B.Index, Halen: 6}
			copy(sa.Addr[:], bd.p.A.MAC)

			r := rand.New(rand.NewPCG(1, 2))
			const good, bad = 200, 20
			kinds := map[string]int{}
			got := make(chan string, good+1)
			go func() {
				buf := make([]byte, 2048)
				for {
					bd.c.SetReadDeadline(time.Now().Add(5 * time.Second))
					n, from, err := bd.c.ReadFromUDPAddrPort(buf)
					if err != nil {
						if !errors.Is(err, net.ErrClosed) {
							got <- "error: " + err.Error()
						}
						close(got)
						return
					}
					got <- fmt.Sprintf("%v %s", from, buf[:n])
				}
			}()
			want := 0
			for i := 0; i < good; i++ {
				payload := []byte(fmt.Sprintf("good %d", i))
				if i == 7 {
					payload = collision(t, bd.p.A.MAC, bd.p.B.MAC, src, bd.srv, string(payload)+" ")
				}
				g := frame(bd.p.A.MAC, bd.p.B.MAC, src, bd.srv, payload)
				for j := 0; j < bad; j++ {
					b, kind := spoil(r, g, v6)
					for partialAlike(b) {
						b, kind = spoil(r, g, v6)
					}
					kinds[kind]++
					if err := unix.Sendto(fd, b, 0, sa); err != nil && len(b) >= 14 {
						t.Fatalf("send %s: %v", kind, err)
					}
				}
				if err := unix.Sendto(fd, g, 0, sa); err != nil {
					t.Fatal(err)
				}
				select {
				case s := <-got:
					if w := fmt.Sprintf("%v %s", src, payload); s != w {
						t.Fatalf("read %q, want %q (sent %v)", s, w, kinds)
					}
					want++
				case <-time.After(10 * time.Second):
					t.Fatalf("good datagram %d not read", i)
				}
			}
			st := bd.c.Stats()
			t.Logf("sent %v; conn %+v", kinds, st)
			if st.Received != good || st.Malformed == 0 || st.BadChecksum == 0 {
				t.Errorf("counters: %+v", st)
			}
		})
	}
}
