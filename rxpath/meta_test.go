package rxpath_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/xdpprog"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// metaRec is what a test handler saw of one packet's metadata.
type metaRec struct {
	sport         uint16
	hash          uint32
	htype         rxpath.HashType
	hashOK        bool
	rxTS, xdpTime int64
	rxTSOK, xdpOK bool
	frontLen      int  // len(Front())
	frontRecord   bool // Front ends in the program's record (its magic)
}

// metaRun attaches the program (with ProgramConfig.Metadata = progMeta, in
// mode) on a fresh veth pair, receives what flows x perFlow datagrams from
// the peer bring with a Poller (Config.Metadata = pollMeta), and returns
// the program's metadata level and reason, the records, the source ports,
// and CLOCK_TAI before the first send and after the last receive.
func metaRun(t *testing.T, mode xsk.AttachMode, progMeta, pollMeta bool, flows, perFlow int) metaResult {
	return metaRunFrom(t, mode, progMeta, pollMeta, flows, perFlow, false)
}

// metaResult is what metaRun saw.
type metaResult struct {
	level  xsk.MetadataLevel
	why    error
	recs   []metaRec
	ports  []uint16
	t0, t1 int64
}

// metaRunFrom is metaRun; with xskSend the peer sends from an AF_XDP
// socket in copy mode that asks for a TX completion timestamp on every
// frame, instead of from UDP sockets.
func metaRunFrom(t *testing.T, mode xsk.AttachMode, progMeta, pollMeta bool, flows, perFlow int, xskSend bool) metaResult {
	t.Helper()
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	pair := vethns.NewPair(t, a, b, nil)
	var (
		u    *umem.UMEM
		sock *xsk.Socket
		prog *xsk.Program
		pl   *rxpath.Poller
	)
	t.Cleanup(func() { // in this order: the Poller reclaims once the socket is closed
		var errs []error
		if prog != nil {
			errs = append(errs, prog.Close())
		}
		if sock != nil {
			errs = append(errs, sock.Close())
		}
		if pl != nil {
			_, err := pl.Reclaim()
			errs = append(errs, err, pl.Close())
		}
		if u != nil {
			errs = append(errs, u.Close())
		}
		if err := errors.Join(errs...); err != nil {
			t.Error(err)
		}
	})
	err := a.Do(func() error {
		var err error
		if u, err = umem.New(&umem.Config{FrameCount: 4096}); err != nil {
			return err
		}
		if sock, err = xsk.New(pair.A.Name, 0, u, nil); err != nil {
			return err
		}
		prog, err = xsk.AttachProgram(pair.A.Name, &xsk.ProgramConfig{
			Filter:   &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{port}},
			Mode:     mode,
			Metadata: progMeta,
		})
		if err != nil {
			return err
		}
		return prog.Register(sock)
	})
	if err != nil {
		t.Fatal(err)
	}
	level, why := prog.Metadata()
	pl, err = rxpath.New(&rxpath.Config{Metadata: pollMeta}, sock)
	if err != nil {
		t.Fatal(err)
	}

	total := flows * perFlow
	recs := make([]metaRec, 0, total)
	var got atomic.Int64
	h := rxpath.HandlerFunc(func(p *rxpath.Packet) {
		_, sport, ok := udpPayload(p.Data)
		if !ok || len(recs) == cap(recs) {
			return
		}
		var r metaRec
		r.sport = sport
		r.hash, r.htype, r.hashOK = p.RXHash()
		r.rxTS, r.rxTSOK = p.RXTimestamp()
		r.xdpTime, r.xdpOK = p.XDPTime()
		if f := p.Front(); len(f) >= 32 {
			r.frontLen = len(f)
			r.frontRecord = binary.NativeEndian.Uint32(f[len(f)-4:]) == xdpprog.MetaMagic
		}
		recs = append(recs, r)
		got.Add(1)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx, h) }()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if st, _ := pl.Stats(); st.Sleeps > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var ports []uint16
	t0 := taiNow(t)
	if xskSend {
		for f := range flows {
			ports = append(ports, uint16(20000+f))
		}
		if err := b.Do(func() error { return xskSendStamped(pair, ports, perFlow, &got) }); err != nil {
			cancel()
			<-done
			if errors.Is(err, umem.ErrNotSupported) {
				vethns.NotApplicable(t, "XDP_UMEM_TX_METADATA_LEN", "the sender's TX completion timestamps: "+err.Error())
			}
			t.Fatal(err)
		}
	} else {
		snd := newSender(t, b, pair.A.AddrPort4(port), flows)
		ports = snd.srcPorts()
		// One datagram in flight per flow at a time: veth's XDP ring is
		// not what this test is about.
		if err := snd.send(perFlow, 64, int64(flows), &got, 20*time.Second); err != nil {
			t.Error(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); got.Load() < int64(total) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	t1 := taiNow(t)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if len(recs) != total {
		t.Fatalf("received %d of %d datagrams", len(recs), total)
	}
	return metaResult{level: level, why: why, recs: recs, ports: ports, t0: t0, t1: t1}
}

func taiNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_TAI, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestRXMetadataNative: a device-bound program on veth (Linux 6.3+; this
// kernel must manage it) gives every packet veth's RX hash (skb_get_hash:
// non-zero, the same within a flow, different across these flows, an L4
// hash for UDP), the XDP hook time between the first send and the last
// receive, and no device timestamp (veth reports the skb's hardware
// timestamp, which no NIC set).
func TestRXMetadataNative(t *testing.T) {
	const flows, perFlow = 4, 50
	res := metaRun(t, xsk.AttachNative, true, true, flows, perFlow)
	level, why, recs, ports, t0, t1 := res.level, res.why, res.recs, res.ports, res.t0, res.t1
	requireKfuncs(t, level, why)
	if level != xsk.MetadataDevice {
		t.Fatalf("Metadata() = %v (%v), want %v on this kernel", level, why, xsk.MetadataDevice)
	}
	byFlow := map[uint16]uint32{}
	for i, r := range recs {
		if !r.hashOK || r.hash == 0 {
			t.Fatalf("packet %d: RXHash() = %#x, %v; want a non-zero hash", i, r.hash, r.hashOK)
		}
		if r.htype&rxpath.HashL4 == 0 {
			t.Errorf("packet %d: hash type %#x, want an L4 hash", i, r.htype)
		}
		if h, ok := byFlow[r.sport]; ok && h != r.hash {
			t.Fatalf("flow from port %d: hash %#x, then %#x", r.sport, h, r.hash)
		}
		byFlow[r.sport] = r.hash
		if r.rxTSOK {
			t.Errorf("packet %d: RXTimestamp() = %d, true; veth has no hardware timestamp", i, r.rxTS)
		}
		if !r.xdpOK || r.xdpTime < t0 || r.xdpTime > t1 {
			t.Fatalf("packet %d: XDPTime() = %d, %v; want within [%d, %d]", i, r.xdpTime, r.xdpOK, t0, t1)
		}
	}
	hashes := make([]uint32, 0, flows)
	for _, p := range ports {
		h, ok := byFlow[p]
		if !ok {
			t.Fatalf("no packet from port %d", p)
		}
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	if len(slices.Compact(hashes)) != flows {
		t.Errorf("flows %v have hashes %x: not all different", ports, byFlow)
	}
}

// TestRXMetadataFallback: in generic mode the kernel refuses a
// device-bound program, so the program falls back to the XDP time alone
// and says why: no hash, no device timestamp, the XDP time still there.
// And a Poller without Config.Metadata, or a program without metadata,
// gives packets none (absent, not zero).
func TestRXMetadataFallback(t *testing.T) {
	t.Run("generic", func(t *testing.T) {
		res := metaRun(t, xsk.AttachGeneric, true, true, 2, 20)
		level, why, recs, t0, t1 := res.level, res.why, res.recs, res.t0, res.t1
		if level != xsk.MetadataXDPTime || why == nil {
			t.Fatalf("Metadata() = %v, %v; want %v with a reason", level, why, xsk.MetadataXDPTime)
		}
		t.Logf("generic: %v: %v", level, why)
		for i, r := range recs {
			if r.hashOK || r.rxTSOK {
				t.Fatalf("packet %d: hash %v, timestamp %v; want neither", i, r.hashOK, r.rxTSOK)
			}
			if !r.xdpOK || r.xdpTime < t0 || r.xdpTime > t1 {
				t.Fatalf("packet %d: XDPTime() = %d, %v; want within [%d, %d]", i, r.xdpTime, r.xdpOK, t0, t1)
			}
		}
	})
	for _, c := range []struct {
		name               string
		progMeta, pollMeta bool
	}{
		{"poller-off", true, false},
		{"program-off", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i, r := range metaRun(t, xsk.AttachNative, c.progMeta, c.pollMeta, 2, 20).recs {
				if r.hashOK || r.rxTSOK || r.xdpOK {
					t.Fatalf("packet %d: %+v; want no metadata", i, r)
				}
				// Front is the headroom in front of the data; the
				// program's record, which a Poller without
				// Config.Metadata leaves alone, is its last bytes.
				// (XDP_PACKET_HEADROOM, the UMEM has none).
				if r.frontRecord != c.progMeta || r.frontLen != 256 {
					t.Fatalf("packet %d: Front() of %d bytes ending in the program's record %v; want 256 bytes, %v",
						i, r.frontLen, r.frontRecord, c.progMeta)
				}
			}
		})
	}
}

// xskSendStamped sends perFlow datagrams from each of the source ports
// from pair.B to pair.A's port through an AF_XDP socket in copy mode,
// each asking for a TX completion timestamp, one at a time (waiting for
// got to count it).
func xskSendStamped(pair *vethns.Pair, ports []uint16, perFlow int, got *atomic.Int64) error {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 64, TxMetadataLen: umem.TxMetadataSize})
	if err != nil {
		return err
	}
	defer u.Close()
	s, err := xsk.New(pair.B.Name, 0, u, &xsk.Config{NoRX: true})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.TxTimestamps(); err != nil {
		return err
	}
	src, dst := pair.B.IPv4.Addr().As4(), pair.A.IPv4.Addr().As4()
	comp := make([]uint64, 64)
	for i := range perFlow * len(ports) {
		base, ok := u.Get()
		if !ok {
			return errors.New("no free frame")
		}
		addr := base + uint64(u.TxMetadataLen())
		f := u.Frame(addr)[:14+20+8+16]
		copy(f, pair.A.MAC)
		copy(f[6:], pair.B.MAC)
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := f[14:34]
		clear(ip)
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
		copy(ip[12:], src[:])
		copy(ip[16:], dst[:])
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
		udp := f[34:]
		clear(udp)
		binary.BigEndian.PutUint16(udp[0:], ports[i%len(ports)])
		binary.BigEndian.PutUint16(udp[2:], port)
		binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
		binary.BigEndian.PutUint32(udp[8:], uint32(i))
		*u.TxMetadataAt(addr) = umem.TxMetadata{}
		xsk.RequestTxTimestamp(u, addr)
		want := got.Load() + 1
		if s.TX().Produce([]xsk.Desc{{Addr: addr, Len: uint32(len(f)), Options: xsk.OptTxMetadata}}) != 1 {
			return errors.New("TX ring full")
		}
		for deadline := time.Now().Add(5 * time.Second); got.Load() < want; {
			if err := s.KickTX(); err != nil {
				return err
			}
			if n := s.Completion().Consume(comp); n > 0 {
				for _, a := range comp[:n] {
					if _, ok := xsk.TxTimestamp(u, a); !ok {
						return fmt.Errorf("no TX timestamp for %#x", a)
					}
				}
				if err := u.PutBatch(comp[:n]); err != nil {
					return err
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("datagram %d not received", i)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	for deadline := time.Now().Add(time.Second); u.Accounting().Free != u.Accounting().Total && time.Now().Before(deadline); {
		if n := s.Completion().Consume(comp); n > 0 {
			if err := u.PutBatch(comp[:n]); err != nil {
				return err
			}
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestRXMetadataStampedSender: from a copy-mode AF_XDP sender that asks
// for a TX completion timestamp on every frame (each one comes back with
// one), the receiver's packets carry the same metadata as from UDP
// sockets: a hash, the XDP time, and no RX timestamp. (The skb's
// hardware timestamp shares skb_shared_info with the AF_XDP completion
// pointer; veth hands XDP a copy of an skb with less than
// XDP_PACKET_HEADROOM, with shared info of its own, so the pointer does
// not show: breaking the program's "positive time" check does not make
// this test fail on 6.18. The check stays, for a path that keeps the
// skb.)
func TestRXMetadataStampedSender(t *testing.T) {
	res := metaRunFrom(t, xsk.AttachNative, true, true, 2, 20, true)
	level, why, recs, t0, t1 := res.level, res.why, res.recs, res.t0, res.t1
	requireKfuncs(t, level, why)
	if level != xsk.MetadataDevice {
		t.Fatalf("Metadata() = %v (%v), want %v", level, why, xsk.MetadataDevice)
	}
	for i, r := range recs {
		if r.rxTSOK {
			t.Fatalf("packet %d: RXTimestamp() = %d (%#x), true; want none", i, r.rxTS, uint64(r.rxTS))
		}
		if !r.hashOK || r.hash == 0 || !r.xdpOK || r.xdpTime < t0 || r.xdpTime > t1 {
			t.Fatalf("packet %d: %+v; want a hash and the XDP time within [%d, %d]", i, r, t0, t1)
		}
	}
}

// requireKfuncs ends the test as not applicable where a device-bound
// program got no RX metadata kfuncs because this kernel lacks them (the
// library fell back to the XDP time and said why).
func requireKfuncs(t *testing.T, level xsk.MetadataLevel, why error) {
	t.Helper()
	if level == xsk.MetadataXDPTime && why != nil && strings.Contains(why.Error(), "not found") {
		vethns.NotApplicable(t, "RX metadata kfuncs", why.Error())
	}
}
