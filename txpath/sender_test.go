package txpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
	src4 = netip.MustParseAddrPort("198.18.0.1:40000")
	dst4 = netip.MustParseAddrPort("198.18.0.2:9000")
	src6 = netip.MustParseAddrPort("[2001:db8::1]:40000")
	dst6 = netip.MustParseAddrPort("[2001:db8::2]:9000")
)

func newUMEM(t testing.TB, meta bool, frames uint32) *umem.UMEM {
	t.Helper()
	c := &umem.Config{FrameSize: 2048, FrameCount: frames}
	if meta {
		c.TxMetadataLen = umem.TxMetadataSize
	}
	u, err := umem.New(c)
	if meta && errors.Is(err, umem.ErrNotSupported) {
		vethns.NotApplicable(t, "XDP_UMEM_TX_METADATA_LEN", "a UMEM with a TX metadata area: "+err.Error())
	}
	if err != nil {
		// It needs CAP_NET_RAW and CAP_IPC_LOCK; CI runs as root.
		if os.Getenv("CI") == "true" {
			t.Fatalf("umem: %v [CI=true: failing instead of skipping]", err)
		}
		t.Skipf("umem: %v", err)
	}
	t.Cleanup(func() {
		if a := u.Accounting(); a.Free != a.Total {
			t.Errorf("frames not returned: %s", a)
		}
		if err := u.Close(); err != nil {
			t.Error(err)
		}
	})
	return u
}

type fakeCfg struct {
	meta, sg, zc bool
	frames       uint32
	ring         int
	cfg          Config
}

func newFake(t testing.TB, fc fakeCfg) (*Sender, *fakePort) {
	t.Helper()
	if fc.frames == 0 {
		fc.frames = 256
	}
	if fc.ring == 0 {
		fc.ring = 128
	}
	u := newUMEM(t, fc.meta, fc.frames)
	p := newFakePort(u, fc.ring)
	c := fc.cfg
	if c.Device == nil {
		c.Device = &Device{TxCsumOffload: true}
	}
	s, err := newSender(u, p, fc.zc, fc.sg, &c, fc.ring, fc.ring)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, p
}

// reassemble returns the bytes of a (possibly chained) packet.
func reassemble(t testing.TB, u *umem.UMEM, descs []xsk.Desc) []byte {
	var b []byte
	for _, d := range descs {
		seg, ok := u.Data(d.Addr, d.Len)
		if !ok {
			t.Fatalf("descriptor %+v outside its frame", d)
		}
		b = append(b, seg...)
	}
	return b
}

// device completes an offloaded checksum the way a NIC (or the kernel's
// skb_checksum_help) does, from the metadata in front of the packet.
func device(t testing.TB, u *umem.UMEM, d xsk.Desc, pkt []byte) {
	if d.Options&xsk.OptTxMetadata == 0 {
		return
	}
	md := u.TxMetadataAt(d.Addr)
	if md == nil || md.Flags != umem.TxMetadataChecksum {
		t.Fatalf("metadata %+v", md)
	}
	start, off := int(md.CsumStart), int(md.CsumOffset)
	if start+off+2 > int(d.Len) {
		t.Fatalf("csum_start %d + csum_offset %d beyond the first buffer (%d)", start, off, d.Len)
	}
	c := csum.Finish(csum.Sum(pkt[start:], 0))
	binary.BigEndian.PutUint16(pkt[start+off:], c)
}

// checkUDP verifies the checksums of the UDP frame pkt and returns its
// payload.
func checkUDP(t testing.TB, pkt []byte, wantZero bool) []byte {
	t.Helper()
	l3 := 14
	var l4, ulen int
	if binary.BigEndian.Uint16(pkt[12:]) == 0x0800 {
		if c := csum.Checksum(pkt[14:34], 0); c != 0 {
			t.Fatalf("IPv4 header checksum does not verify (%#x)", c)
		}
		total := int(binary.BigEndian.Uint16(pkt[16:]))
		if total != len(pkt)-l3 {
			t.Fatalf("IPv4 total length %d, frame %d", total, len(pkt))
		}
		l4, ulen = 34, total-20
		if wantZero {
			if c := binary.BigEndian.Uint16(pkt[40:]); c != 0 {
				t.Fatalf("checksum %#x, want 0", c)
			}
		} else {
			p := csum.PseudoHeaderIPv4([4]byte(pkt[26:30]), [4]byte(pkt[30:34]), 17, uint16(ulen))
			if c := csum.Finish(csum.Sum(pkt[34:], p)); c != 0 || binary.BigEndian.Uint16(pkt[40:]) == 0 {
				t.Fatalf("UDP checksum does not verify (%#x)", c)
			}
		}
	} else {
		ulen = int(binary.BigEndian.Uint16(pkt[18:]))
		if ulen != len(pkt)-54 {
			t.Fatalf("IPv6 payload length %d, frame %d", ulen, len(pkt))
		}
		l4 = 54
		p := csum.PseudoHeaderIPv6([16]byte(pkt[22:38]), [16]byte(pkt[38:54]), 17, uint32(ulen))
		if c := csum.Finish(csum.Sum(pkt[54:], p)); c != 0 || binary.BigEndian.Uint16(pkt[60:]) == 0 {
			t.Fatalf("UDP checksum does not verify (%#x)", c)
		}
	}
	if got := int(binary.BigEndian.Uint16(pkt[l4+4:])); got != ulen {
		t.Fatalf("UDP length %d, want %d", got, ulen)
	}
	return pkt[l4+8:]
}

func pattern(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// split cuts b into up to 4 pieces at random points (gather input).
func split(r *rand.Rand, b []byte) [][]byte {
	var parts [][]byte
	for len(parts) < 3 && len(b) > 1 && r.IntN(2) == 0 {
		i := r.IntN(len(b))
		parts = append(parts, b[:i])
		b = b[i:]
	}
	return append(parts, b)
}

func TestSendUDPPolicies(t *testing.T) {
	for _, pol := range []Policy{Software, Offload, NT, Plain} {
		for _, meta := range []bool{false, true} {
			if pol == Offload && !meta {
				continue
			}
			for _, fam := range []string{"ipv4", "ipv6"} {
				if pol == Plain && fam == "ipv6" {
					continue
				}
				name := pol.String() + "/" + fam
				if meta {
					name += "/meta"
				}
				t.Run(name, func(t *testing.T) {
					testSendUDP(t, pol, meta, fam == "ipv6")
				})
			}
		}
	}
}

func testSendUDP(t *testing.T, pol Policy, meta, v6 bool) {
	s, p := newFake(t, fakeCfg{meta: meta, sg: true, cfg: Config{Policy: pol, BatchSize: 16, NTThreshold: 512}})
	src, dst := src4, dst4
	if v6 {
		src, dst = src6, dst6
	}
	flow, err := NewUDPFlow(macA, macB, src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, uint64(pol)))
	var want [][]byte
	got := 0
	p.onPacket = func(descs []xsk.Desc) {
		pkt := reassemble(t, s.u, descs)
		if descs[0].Options&xsk.OptTxMetadata != 0 && !(pol == Offload || pol == NT) {
			t.Fatalf("metadata requested under %s", pol)
		}
		device(t, s.u, descs[0], pkt)
		pl := checkUDP(t, pkt, pol == Plain)
		if got >= len(want) || !bytes.Equal(pl, want[got]) {
			t.Fatalf("datagram %d: payload differs (len %d)", got, len(pl))
		}
		if !bytes.Equal(pkt[:12], append(append([]byte{}, macB...), macA...)) {
			t.Fatalf("MACs % x", pkt[:12])
		}
		got++
	}
	sizes := []int{0, 1, 17, 18, 255, 256, 257, 511, 512, 1000, 1458, 1472, 1999, 2000, 2048, 4000, 8000, 9000}
	for i := 0; i < 300; i++ {
		n := sizes[i%len(sizes)]
		if i >= len(sizes) {
			n = r.IntN(9001)
		}
		pl := pattern(r, n)
		want = append(want, pl)
		if err := s.SendUDP(flow, Options{}, split(r, pl)...); err != nil {
			t.Fatalf("send %d (%d bytes): %v", i, n, err)
		}
	}
	if err := s.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got != len(want) {
		t.Fatalf("%d datagrams on the wire, want %d", got, len(want))
	}
	st := s.Stats()
	if pol == Offload && st.Offloaded != st.Packets {
		t.Errorf("offloaded %d of %d", st.Offloaded, st.Packets)
	}
	if pol == NT && st.Fences == 0 {
		t.Errorf("NT policy never fenced: %+v", st)
	}
	if pol == Software && (st.NTCopies != 0 || st.Offloaded != 0) {
		t.Errorf("software policy: %+v", st)
	}
	t.Logf("%+v", st)
}

func TestDecide(t *testing.T) {
	th := func() int { return 1024 }
	cases := []struct {
		want   Policy
		zc     bool
		meta   bool
		dev    Device
		policy Policy
		ntFrom int
		err    error
	}{
		{Auto, false, false, Device{TxCsumOffload: true}, Software, 0, nil},
		{Auto, false, true, Device{TxCsumOffload: true}, Offload, 0, nil},
		{Auto, false, true, Device{}, Software, 0, nil},
		{Auto, true, true, Device{XSKTxChecksum: true}, Offload, 1024, nil},
		{Auto, true, true, Device{TxCsumOffload: true}, Software, 0, nil},
		{Auto, true, false, Device{XSKTxChecksum: true}, Software, 0, nil},
		{Offload, false, false, Device{TxCsumOffload: true}, 0, 0, ErrNoMetadata},
		{Offload, true, true, Device{}, 0, 0, ErrNotSupported},
		{Offload, false, true, Device{}, Offload, 0, nil},
		{NT, false, false, Device{}, NT, 0, nil},
		{Policy(42), false, false, Device{}, 0, 0, ErrPolicy},
	}
	for i, c := range cases {
		d, err := decide(c.want, c.zc, c.meta, c.dev, th)
		if !errors.Is(err, c.err) {
			t.Errorf("%d: err %v, want %v", i, err, c.err)
			continue
		}
		if err != nil {
			continue
		}
		if d.Policy != c.policy || d.NTFrom != c.ntFrom || d.Reason == "" {
			t.Errorf("%d: %v, want %v NT from %d", i, d, c.policy, c.ntFrom)
		}
	}
}

func TestBadInput(t *testing.T) {
	s, p := newFake(t, fakeCfg{meta: false})
	flow4, _ := NewUDPFlow(macA, macB, src4, dst4, nil)
	flow6, _ := NewUDPFlow(macA, macB, src6, dst6, nil)
	big := make([]byte, 3000)
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
		if len(s.descs) != 0 || len(p.ring) != 0 {
			t.Errorf("%s: something was queued", what)
		}
	}
	check("payload larger than a frame without multi-buffer", s.SendUDP(flow4, Options{}, big), ErrTooBig)
	check("offload without metadata", s.SendUDP(flow4, Options{Policy: Offload}, big[:10]), ErrNoMetadata)
	check("plain over IPv6", s.SendUDP(flow6, Options{Policy: Plain}, big[:10]), ErrPolicy)
	check("unknown policy", s.SendUDP(flow4, Options{Policy: 99}, big[:10]), ErrPolicy)
	check("nil flow", s.SendUDP(nil, Options{}), ErrBadFlow)
	check("empty frame", s.SendFrame(Options{}), ErrBadFrame)
	check("frame too big", s.SendFrame(Options{}, big), ErrTooBig)
	if _, err := NewUDPFlow(macA, macB, src4, dst6, nil); !errors.Is(err, ErrBadFlow) {
		t.Errorf("mixed families: %v", err)
	}
	if _, err := NewUDPFlow(macA[:4], macB, src4, dst4, nil); !errors.Is(err, ErrBadFlow) {
		t.Errorf("short MAC: %v", err)
	}

	// Raw frames with inconsistent headers.
	good := make([]byte, 100)
	copy(good, flow4.hdr[:42])
	binary.BigEndian.PutUint16(good[16:], 100-14)
	binary.BigEndian.PutUint16(good[38:], 100-34)
	bad := func(mod func(b []byte)) []byte {
		b := bytes.Clone(good)
		mod(b)
		return b
	}
	for _, c := range []struct {
		what string
		b    []byte
	}{
		{"IPv4 total length larger than the frame", bad(func(b []byte) { binary.BigEndian.PutUint16(b[16:], 200) })},
		{"IPv4 total length shorter than the header", bad(func(b []byte) { binary.BigEndian.PutUint16(b[16:], 10) })},
		{"IPv4 IHL 4", bad(func(b []byte) { b[14] = 0x44 })},
		{"UDP length disagrees", bad(func(b []byte) { binary.BigEndian.PutUint16(b[38:], 50) })},
		{"IP version 5", bad(func(b []byte) { b[14] = 0x55 })},
		{"not IP", bad(func(b []byte) { b[12] = 0x88 })},
		{"fragment", bad(func(b []byte) { b[20] = 0x20 })},
		{"truncated headers", good[:30]},
	} {
		check("SendFrame: "+c.what, s.SendFrame(Options{Checksum: true}, c.b), ErrBadPacket)
		f, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		n := copy(f.Buf, c.b)
		check("Commit: "+c.what, s.Commit(f, n, Options{Checksum: true}), ErrBadPacket)
		if err := s.Release(f); !errors.Is(err, ErrBadFrame) { // Commit gave it back
			t.Fatalf("Release after a failed Commit: %v", err)
		}
	}
	if err := s.SendFrame(Options{Checksum: true}, good); err != nil {
		t.Fatalf("good frame: %v", err)
	}
	f, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(f, len(f.Buf)+1, Options{}); !errors.Is(err, ErrBadFrame) {
		t.Errorf("commit beyond the frame: %v", err)
	}
	if f, err = s.Next(); err != nil { // the failed Commit gave f back
		t.Fatal(err)
	}
	if err := s.Commit(Frame{addr: f.addr + 2048}, 60, Options{}); !errors.Is(err, ErrBadFrame) {
		t.Errorf("commit of a frame never reserved: %v", err)
	}
	copy(f.Buf, good)
	if err := s.Commit(f, len(good), Options{Checksum: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(f, len(good), Options{}); !errors.Is(err, ErrBadFrame) {
		t.Errorf("second commit of a frame: %v", err)
	}
	if err := s.Release(f); !errors.Is(err, ErrBadFrame) {
		t.Errorf("release of a committed frame: %v", err)
	}
	if len(s.descs) != 2 {
		t.Errorf("%d descriptors queued, want 2", len(s.descs))
	}
}

func TestNewErrors(t *testing.T) {
	u := newUMEM(t, false, 64)
	p := newFakePort(u, 64)
	for _, c := range []struct {
		cfg Config
		err error
	}{
		{Config{Policy: Offload}, ErrNoMetadata},
		{Config{BatchSize: 65}, ErrConfig},
		{Config{Headroom: 3}, ErrConfig},
		{Config{Headroom: 1984}, ErrConfig},
		{Config{MaxPacket: 3000}, ErrConfig},
	} {
		if _, err := newSender(u, p, false, false, &c.cfg, 64, 64); !errors.Is(err, c.err) {
			t.Errorf("%+v: %v, want %v", c.cfg, err, c.err)
		}
	}
}

// TestBackpressure: a stalled device fills the ring, sends fail fast with
// the sentinels and queue nothing, Wait times out; once the device runs
// again every datagram arrives exactly once, in order.
func TestBackpressure(t *testing.T) {
	for _, limit := range []string{"ring", "frames"} {
		t.Run(limit, func(t *testing.T) {
			fc := fakeCfg{ring: 32, frames: 256, cfg: Config{BatchSize: 8}}
			if limit == "frames" {
				fc.ring, fc.frames = 256, 24
			}
			s, p := newFake(t, fc)
			flow, _ := NewUDPFlow(macA, macB, src4, dst4, nil)
			var seen []uint32
			p.onPacket = func(d []xsk.Desc) {
				pkt := reassemble(t, s.u, d)
				seen = append(seen, binary.BigEndian.Uint32(checkUDP(t, pkt, false)))
			}
			p.hold = true
			var buf [64]byte
			seq := uint32(0)
			var err error
			for ; seq < 1000; seq++ {
				binary.BigEndian.PutUint32(buf[:], seq)
				if err = s.SendUDP(flow, Options{}, buf[:]); err != nil {
					break
				}
			}
			want := ErrRingFull
			if limit == "frames" {
				want = ErrNoFrames
			}
			if !errors.Is(err, want) {
				t.Fatalf("after %d sends: %v, want %v", seq, err, want)
			}
			queued := len(s.descs)
			if err := s.SendUDP(flow, Options{}, buf[:]); !errors.Is(err, want) || len(s.descs) != queued {
				t.Fatalf("second failing send: %v, %d queued (was %d)", err, len(s.descs), queued)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			err = s.Wait(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait on a stalled device: %v", err)
			}
			p.hold = false
			for ; seq < 1000; seq++ {
				binary.BigEndian.PutUint32(buf[:], seq)
				for {
					err := s.SendUDP(flow, Options{}, buf[:])
					if err == nil {
						break
					}
					if !errors.Is(err, ErrRingFull) && !errors.Is(err, ErrNoFrames) {
						t.Fatal(err)
					}
					if err := s.Wait(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 1000 {
				t.Fatalf("%d datagrams sent, want 1000", len(seen))
			}
			for i, v := range seen {
				if v != uint32(i) {
					t.Fatalf("datagram %d carries %d", i, v)
				}
			}
		})
	}
}

func TestNoAllocs(t *testing.T) {
	for _, pol := range []Policy{Software, Offload, NT, Plain} {
		s, _ := newFake(t, fakeCfg{meta: true, cfg: Config{Policy: pol}})
		flow, _ := NewUDPFlow(macA, macB, src4, dst4, nil)
		pl := make([]byte, 1458)
		hdr := make([]byte, 42)
		a := testing.AllocsPerRun(1000, func() {
			if err := s.SendUDP(flow, Options{}, hdr[:8], pl[8:]); err != nil {
				t.Fatal(err)
			}
		})
		b := testing.AllocsPerRun(1000, func() {
			f, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			copy(f.Buf, flow.hdr[:42])
			binary.BigEndian.PutUint16(f.Buf[16:], 100-14)
			binary.BigEndian.PutUint16(f.Buf[38:], 100-34)
			if err := s.Commit(f, 100, Options{Checksum: pol != Plain}); err != nil {
				t.Fatal(err)
			}
		})
		if a != 0 || b != 0 {
			t.Errorf("%s: SendUDP %v allocs, Next+Commit %v", pol, a, b)
		}
	}
}

// TestOffloadTrailer: a frame with bytes after its IP packet (Ethernet
// padding) is checksummed in software, since the device would sum the
// padding too; a frame without is offloaded.
func TestOffloadTrailer(t *testing.T) {
	s, p := newFake(t, fakeCfg{meta: true, cfg: Config{Policy: Offload}})
	build := func(b []byte) int {
		// 46 bytes: Ethernet, IPv4, UDP with 4 bytes of payload.
		copy(b, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00})
		ip := b[14:34]
		copy(ip, []byte{0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2})
		copy(b[34:], []byte{0x9c, 0x40, 0x23, 0x28, 0, 12, 0, 0, 'a', 'b', 'c', 'd'})
		return 46
	}
	var got []xsk.Desc
	p.onPacket = func(d []xsk.Desc) { got = append(got, d...) }
	for _, n := range []int{46, 60} {
		f, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.Buf[:60] {
			f.Buf[i] = 0xee // stale bytes, then the packet over them
		}
		build(f.Buf)
		if err := s.Commit(f, n, Options{Checksum: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d packets sent, want 2", len(got))
	}
	if got[0].Options&xsk.OptTxMetadata == 0 {
		t.Error("a 46-byte frame (no trailer) was not offloaded")
	}
	if got[1].Options&xsk.OptTxMetadata != 0 {
		t.Error("a frame with 14 bytes of padding was offloaded: the device would sum the padding")
	}
	pkt := reassemble(t, s.u, got[1:2])
	if c := csum.Finish(csum.Sum(pkt[34:46], csum.PseudoHeaderIPv4([4]byte(pkt[26:30]), [4]byte(pkt[30:34]), 17, 12))); c != 0 {
		t.Errorf("software checksum of the padded frame does not verify (%#x)", c)
	}
}

// TestReleaseNoGrow: frames released while the cache is full go back to
// the allocator; the cache never grows (no allocation).
func TestReleaseNoGrow(t *testing.T) {
	s, _ := newFake(t, fakeCfg{})
	c := cap(s.cache)
	for i := 0; i < 64; i++ { // a whole batch, committed
		f, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(f, 60, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	var fs []Frame
	for i := 0; i < 2; i++ { // reserved while the cache was refilled
		f, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	for _, f := range fs {
		if err := s.Release(f); err != nil {
			t.Fatal(err)
		}
	}
	if cap(s.cache) != c {
		t.Fatalf("cache grew from %d to %d", c, cap(s.cache))
	}
}

// TestChainLimit: copy mode refuses a MaxPacket whose chain the kernel
// would drop (more than 18 buffers); zero-copy leaves it to the driver.
func TestChainLimit(t *testing.T) {
	u := newUMEM(t, false, 256)
	p := newFakePort(u, 128)
	c := Config{MaxPacket: 60000, Device: &Device{}}
	if _, err := newSender(u, p, false, true, &c, 128, 128); !errors.Is(err, ErrConfig) {
		t.Fatalf("copy mode, 60000-byte packets: %v, want ErrConfig", err)
	}
	s, err := newSender(u, p, true, true, &c, 128, 128)
	if err != nil {
		t.Fatalf("zero-copy, 60000-byte packets: %v", err)
	}
	s.Close()
}
