package rxpath_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
}

// metaRun attaches the program (with ProgramConfig.Metadata = progMeta, in
// mode) on a fresh veth pair, receives what flows x perFlow datagrams from
// the peer bring with a Poller (Config.Metadata = pollMeta), and returns
// the program's metadata level and reason, the records, the source ports,
// and CLOCK_TAI before the first send and after the last receive.
func metaRun(t *testing.T, mode xsk.AttachMode, progMeta, pollMeta bool, flows, perFlow int) (level xsk.MetadataLevel, why error, recs []metaRec, ports []uint16, t0, t1 int64) {
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
	level, why = prog.Metadata()
	pl, err = rxpath.New(&rxpath.Config{Metadata: pollMeta}, sock)
	if err != nil {
		t.Fatal(err)
	}

	total := flows * perFlow
	recs = make([]metaRec, 0, total)
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
	snd := newSender(t, b, pair.A.AddrPort4(port), flows)
	ports = snd.srcPorts()
	t0 = taiNow(t)
	// One datagram in flight per flow at a time: veth's XDP ring is not
	// what this test is about.
	if err := snd.send(perFlow, 64, int64(flows), &got, 20*time.Second); err != nil {
		t.Error(err)
	}
	for deadline := time.Now().Add(5 * time.Second); got.Load() < int64(total) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	t1 = taiNow(t)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if len(recs) != total {
		t.Fatalf("received %d of %d datagrams", len(recs), total)
	}
	return level, why, recs, ports, t0, t1
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
	level, why, recs, ports, t0, t1 := metaRun(t, xsk.AttachNative, true, true, flows, perFlow)
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
		level, why, recs, _, t0, t1 := metaRun(t, xsk.AttachGeneric, true, true, 2, 20)
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
			_, _, recs, _, _, _ := metaRun(t, xsk.AttachNative, c.progMeta, c.pollMeta, 2, 20)
			for i, r := range recs {
				if r.hashOK || r.rxTSOK || r.xdpOK {
					t.Fatalf("packet %d: %+v; want no metadata", i, r)
				}
			}
		})
	}
}
