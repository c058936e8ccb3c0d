package txpath_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

func TestMain(m *testing.M) {
	vethns.Exclusive()
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

// env is two namespaces joined by a veth pair, with rx-checksumming off
// on the receiving end B, so that its kernel verifies every UDP checksum
// (veth otherwise marks packets from the sender CHECKSUM_UNNECESSARY).
type env struct {
	a, b *vethns.NS
	p    *vethns.Pair
}

func newEnv(t testing.TB, mtu int) *env {
	t.Helper()
	vethns.Require(t)
	e := &env{a: vethns.NewNS(t), b: vethns.NewNS(t)}
	e.p = vethns.NewPair(t, e.a, e.b, &vethns.PairConfig{MTU: mtu})
	if err := e.b.Do(func() error { return netdev.SetRxCsumOffload(e.p.B.Name, false) }); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) addrs(v6 bool) (src, dst netip.AddrPort) {
	if v6 {
		return e.p.A.AddrPort6(40000), e.p.B.AddrPort6(9000)
	}
	return e.p.A.AddrPort4(40000), e.p.B.AddrPort4(9000)
}

// csumErrors reads the receiver's UDP checksum error counters.
func (e *env) csumErrors(t testing.TB) int64 {
	t.Helper()
	c, err := e.b.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c["Udp:InCsumErrors"] + c["Udp6:InCsumErrors"]
}

// fillPayload writes datagram seq's payload into b[:n]: the sequence
// number, then bytes that depend on it.
func fillPayload(b []byte, seq, n int) []byte {
	b = b[:n]
	binary.BigEndian.PutUint32(b, uint32(seq))
	x := uint32(seq)*2654435761 + 1
	for i := 4; i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// payloadLen is datagram seq's payload size: frames from 64 to 1514
// bytes (or jumbo sizes), cycling.
func payloadLen(seq, hdr, minFrame, maxFrame int) int {
	span := maxFrame - minFrame + 1
	return max(minFrame+(seq*997)%span-hdr, 4)
}

// receiver reads n datagrams on conn, checks each byte against
// fillPayload in sequence, and counts them in acked.
func receiver(conn *net.UDPConn, n int, size func(seq int) int, acked *atomic.Int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 65536)
		want := make([]byte, 65536)
		for i := 0; i < n; i++ {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			m, err := conn.Read(buf)
			if err != nil {
				done <- fmt.Errorf("after %d datagrams: %w", i, err)
				return
			}
			if m >= 4 {
				if seq := int(binary.BigEndian.Uint32(buf)); seq != i {
					done <- fmt.Errorf("datagram %d has sequence %d", i, seq)
					return
				}
			}
			if w := fillPayload(want, i, size(i)); !bytes.Equal(buf[:m], w) {
				done <- fmt.Errorf("datagram %d: payload differs (%d bytes, want %d)", i, m, len(w))
				return
			}
			acked.Add(1)
		}
		done <- nil
	}()
	return done
}

type run struct {
	policy  txpath.Policy
	v6      bool
	n       int
	jumbo   bool
	swCsum  bool // UMEM with XDP_UMEM_TX_SW_CSUM
	meta    bool // UMEM with a TX metadata area
	raw     bool // frames built in place by the test (Next/Commit), sent plain
	corrupt bool // negative control: a wrong UDP checksum (raw frames)
	// wire, if not nil, counts datagrams a capture has read; the window
	// waits for it too, so that the capture socket never overflows.
	wire *atomic.Int64
}

// send runs r over e: n datagrams through a txpath.Sender in A to a
// kernel UDP socket in B, paced by a window against the receiver.
func (e *env) send(t *testing.T, r run) (txpath.Stats, txpath.Decision) {
	t.Helper()
	src, dst := e.addrs(r.v6)
	conn, err := e.b.ListenUDP(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Room for the whole window of the largest frames: SetReadBuffer would
	// be capped at net.core.rmem_max.
	if err := vethns.ForceReadBuffer(conn, 16<<20); err != nil {
		t.Fatal(err)
	}
	hdr := 42
	if r.v6 {
		hdr = 62
	}
	minF, maxF := 64, 1514
	if r.jumbo {
		minF, maxF = 4000, 9014
	}
	size := func(seq int) int { return payloadLen(seq, hdr, minF, maxF) }
	var acked atomic.Int64
	var recvd <-chan error
	if r.corrupt {
		// The receiver's recvmsg drops and counts every bad datagram on
		// its way to the good marker datagram sent after them (seq r.n):
		// Udp:InCsumErrors moves at recvmsg, and closing a socket with
		// datagrams still queued would purge them uncounted.
		recvd = marker(conn, r.n, size)
	} else {
		recvd = receiver(conn, r.n, size, &acked)
	}

	var (
		st  txpath.Stats
		dec txpath.Decision
	)
	err = e.a.Do(func() error {
		uc := &umem.Config{FrameSize: 4096, FrameCount: 2048, TxSwCsum: r.swCsum}
		if r.meta {
			uc.TxMetadataLen = umem.TxMetadataSize
		}
		u, err := umem.New(uc)
		if (r.meta || r.swCsum) && errors.Is(err, umem.ErrNotSupported) {
			return &notApplicable{"XDP_UMEM_TX_METADATA_LEN", err}
		}
		if err != nil {
			return err
		}
		defer u.Close()
		sock, err := xsk.New(e.p.A.Name, 0, u, &xsk.Config{NoRX: true, MultiBuffer: r.jumbo, TXSize: 1024, CompletionSize: 2048})
		if r.jumbo && errors.Is(err, xsk.ErrNotSupported) {
			return &notApplicable{"AF_XDP multi-buffer", err}
		}
		if err != nil {
			return err
		}
		defer sock.Close()
		s, err := txpath.New(sock, &txpath.Config{Policy: r.policy})
		if err != nil {
			return err
		}
		dec = s.Decision()
		flow, err := txpath.NewUDPFlow(e.p.A.MAC, e.p.B.MAC, src, dst, nil)
		if err != nil {
			return err
		}
		buf := make([]byte, 65536)
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		defer cancel()
		// At most 200 in flight: below the receiving veth's backlog and
		// (for the other tests of this file) its 256-entry XDP ring.
		const window = 200
		for seq := 0; seq < r.n; seq++ {
			for !r.corrupt && (int64(seq)-acked.Load() >= window || r.wire != nil && int64(seq)-r.wire.Load() >= window) {
				if err := s.Flush(); err != nil {
					return err
				}
				if ctx.Err() != nil {
					xs, _ := sock.Stats()
					var wire int64 = -1
					if r.wire != nil {
						wire = r.wire.Load()
					}
					return fmt.Errorf("receiver stuck at %d (capture at %d) of %d (%+v, %+v, %s)", acked.Load(), wire, seq, xs, s.Stats(), u.Accounting())
				}
				time.Sleep(20 * time.Microsecond)
			}
			pl := fillPayload(buf[hdr:], seq, size(seq))
			for {
				if r.raw {
					err = sendRaw(s, e, src, dst, pl, r.corrupt)
				} else {
					// Gather from two slices: the sequence number, the rest.
					err = s.SendUDP(flow, txpath.Options{}, pl[:4], pl[4:])
				}
				if !errors.Is(err, txpath.ErrNoFrames) && !errors.Is(err, txpath.ErrRingFull) {
					break
				}
				if err := s.Wait(ctx); err != nil {
					return fmt.Errorf("datagram %d: %w", seq, err)
				}
			}
			if err != nil {
				return fmt.Errorf("datagram %d: %w", seq, err)
			}
		}
		if r.corrupt {
			pl := fillPayload(buf[hdr:], r.n, size(r.n))
			for {
				err = sendRaw(s, e, src, dst, pl, false)
				if !errors.Is(err, txpath.ErrNoFrames) && !errors.Is(err, txpath.ErrRingFull) {
					break
				}
				if err := s.Wait(ctx); err != nil {
					return fmt.Errorf("marker: %w", err)
				}
			}
			if err != nil {
				return fmt.Errorf("marker: %w", err)
			}
		}
		if err := s.Drain(ctx); err != nil {
			return err
		}
		st = s.Stats()
		if err := s.Close(); err != nil {
			return err
		}
		xs, err := sock.Stats()
		if err != nil {
			return err
		}
		if xs.TXInvalidDescs != 0 {
			return fmt.Errorf("tx_invalid_descs %d", xs.TXInvalidDescs)
		}
		if a := u.Accounting(); a.Free != a.Total {
			return fmt.Errorf("frames not free after the run: %s", a)
		}
		return nil
	})
	checkApplicable(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if recvd != nil {
		if err := <-recvd; err != nil {
			t.Fatal(err)
		}
	}
	return st, dec
}

// marker reads conn until it receives the datagram with sequence seq;
// any other datagram that arrives first is an error.
func marker(conn *net.UDPConn, seq int, size func(seq int) int) <-chan error {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 65536)
		want := make([]byte, 65536)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, err := conn.Read(buf)
		if err != nil {
			done <- fmt.Errorf("no marker datagram: %w", err)
			return
		}
		if w := fillPayload(want, seq, size(seq)); !bytes.Equal(buf[:m], w) {
			done <- fmt.Errorf("the first datagram received is not the marker (%d bytes)", m)
			return
		}
		done <- nil
	}()
	return done
}

// sendRaw builds the frame in place (Next/Commit) with the test's own
// header code and checksum, and sends it with the plain policy.
func sendRaw(s *txpath.Sender, e *env, src, dst netip.AddrPort, pl []byte, corrupt bool) error {
	f, err := s.Next()
	if err != nil {
		return err
	}
	n := udpFrame(f.Buf, e.p.A.MAC, e.p.B.MAC, src, dst, pl)
	if corrupt {
		l4 := 34
		if src.Addr().Is6() {
			l4 = 54
		}
		f.Buf[l4+6] ^= 0x5a
	}
	if err := s.Commit(f, n, txpath.Options{Policy: txpath.Plain}); err != nil {
		_ = s.Release(f)
		return err
	}
	return nil
}

// udpFrame is the test's reference frame builder, independent of
// txpath's templates.
func udpFrame(b []byte, srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) int {
	copy(b[0:6], dstMAC)
	copy(b[6:12], srcMAC)
	ulen := 8 + len(payload)
	var l4 []byte
	var pseudo uint32
	if src.Addr().Is4() {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:34]
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:], uint16(20+ulen))
		binary.BigEndian.PutUint32(ip[4:], 0x40000000)
		ip[8], ip[9], ip[10], ip[11] = 64, 17, 0, 0
		s4, d4 := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:], s4[:])
		copy(ip[16:], d4[:])
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
		l4 = b[34 : 34+ulen]
		pseudo = csum.PseudoHeaderIPv4(s4, d4, 17, uint16(ulen))
	} else {
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		ip := b[14:54]
		binary.BigEndian.PutUint32(ip, 6<<28)
		binary.BigEndian.PutUint16(ip[4:], uint16(ulen))
		ip[6], ip[7] = 17, 64
		s6, d6 := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:], s6[:])
		copy(ip[24:], d6[:])
		l4 = b[54 : 54+ulen]
		pseudo = csum.PseudoHeaderIPv6(s6, d6, 17, uint32(ulen))
	}
	binary.BigEndian.PutUint16(l4[0:], src.Port())
	binary.BigEndian.PutUint16(l4[2:], dst.Port())
	binary.BigEndian.PutUint16(l4[4:], uint16(ulen))
	binary.BigEndian.PutUint16(l4[6:], 0)
	copy(l4[8:], payload)
	binary.BigEndian.PutUint16(l4[6:], csum.FinishUDP(csum.Sum(l4, pseudo)))
	if src.Addr().Is4() {
		return 34 + ulen
	}
	return 54 + ulen
}

var _ = unix.ETH_P_ALL

// notApplicable is what a namespace function returns when the kernel lacks
// a feature (the library said ErrNotSupported); the test goroutine then
// calls vethns.NotApplicable (a skip must not run on another goroutine).
type notApplicable struct {
	feature string
	err     error
}

func (e *notApplicable) Error() string { return e.feature + ": " + e.err.Error() }
func (e *notApplicable) Unwrap() error { return e.err }

// checkApplicable ends t as not applicable for a notApplicable error.
func checkApplicable(t *testing.T, err error) {
	t.Helper()
	var na *notApplicable
	if errors.As(err, &na) {
		vethns.NotApplicable(t, na.feature, na.err.Error())
	}
}
