package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// mode is one of the kernel suite's test modes.
type mode struct {
	name   string
	attach link.XDPAttachFlags // where the XDP program runs
	bind   xsk.Mode            // copy or zero-copy
	zc     bool
}

// modes are the modes every case runs in, as subtests. ZC runs only
// where NIC pairs exist (zc_test.go).
var modes = []mode{
	{name: "SKB", attach: link.XDPGenericMode, bind: xsk.ModeCopy},
	{name: "DRV", attach: link.XDPDriverMode, bind: xsk.ModeCopy},
	{name: "ZC", attach: link.XDPDriverMode, bind: xsk.ModeZeroCopy, zc: true},
}

// devices are the two interfaces a case sends between, and the
// namespace each is in.
type devices struct {
	txNS, rxNS *vethns.NS
	tx, rx     string
}

// newDevices returns the device pair for mode m: a fresh veth pair in a
// fresh namespace (SKB, DRV), or a NIC pair with each NIC in a fresh
// namespace of its own (ZC), given back when the test ends.
func newDevices(t *testing.T, m mode) *devices {
	t.Helper()
	vethns.Require(t)
	var d *devices
	if m.zc {
		a, b := vethns.NewNS(t), vethns.NewNS(t)
		p := vethns.NewNICPair(t, a, b, nil)
		d = &devices{txNS: a, rxNS: b, tx: p.A.Name, rx: p.B.Name}
		// The cases' frames carry the kernel suite's own MAC
		// addresses, which a NIC filters out unless promiscuous.
		promisc(t, a, p.A.Name)
		promisc(t, b, p.B.Name)
	} else {
		ns := vethns.NewNS(t)
		p := vethns.NewPair(t, ns, ns, nil)
		d = &devices{txNS: ns, rxNS: ns, tx: p.A.Name, rx: p.B.Name}
	}
	// Only the case's frames: no IPv6 neighbour or multicast listener
	// traffic from the stack, which the programs would redirect too.
	for _, e := range []struct {
		ns   *vethns.NS
		name string
	}{{d.txNS, d.tx}, {d.rxNS, d.rx}} {
		err := e.ns.Do(func() error {
			return os.WriteFile("/proc/sys/net/ipv6/conf/"+e.name+"/disable_ipv6", []byte("1"), 0)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// promisc turns promiscuous mode on for the test.
func promisc(t *testing.T, ns *vethns.NS, name string) {
	t.Helper()
	set := func(on bool) error {
		return ns.Do(func() error {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if on {
				return netlink.SetPromiscOn(l)
			}
			return netlink.SetPromiscOff(l)
		})
	}
	if err := set(true); err != nil {
		t.Fatalf("promiscuous mode on %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := set(false); err != nil {
			t.Errorf("promiscuous mode off on %s: %v", name, err)
		}
	})
}

// forModes runs f once per mode, each on its own devices.
func forModes(t *testing.T, f func(t *testing.T, tc *testSpec)) { runModes(t, nil, f) }

// forModesMB runs a multi-buffer case (MTU 9000) once per mode; in ZC
// only where the driver takes multi-buffer packets in zero-copy
// (xdp_zc_max_segs above 1), as the kernel suite does.
func forModesMB(t *testing.T, f func(t *testing.T, tc *testSpec)) {
	runModes(t, func(z *zcCaps) string {
		if z.maxSegs <= 1 {
			return fmt.Sprintf("the kernel suite runs multi-buffer cases in zero-copy mode only where the driver takes more than one buffer per packet; %s takes %d", z.driver, max(z.maxSegs, 1))
		}
		return ""
	}, f)
}

// forModesNoZC runs f in the copy modes only, for the reason why.
func forModesNoZC(t *testing.T, why string, f func(t *testing.T, tc *testSpec)) {
	runModes(t, func(*zcCaps) string { return why }, f)
}

// runModes runs f in SKB and DRV mode, and in ZC where a NIC pair
// exists: there, where the driver has no zero-copy mode, the ZC subtest
// checks the library's refusal and ends as not applicable; where
// excludeZC gives a reason (the kernel suite leaves the case out of
// zero-copy mode, or it cannot run there), there is no ZC subtest and
// the test logs why.
func runModes(t *testing.T, excludeZC func(*zcCaps) string, f func(t *testing.T, tc *testSpec)) {
	for _, m := range modes {
		if m.zc {
			if vethns.NICPairs() == 0 {
				continue // no NIC pair: no ZC subtest (TestZeroCopyMode)
			}
			z := probeZC(t)
			if z.ok && excludeZC != nil {
				if why := excludeZC(z); why != "" {
					t.Logf("ZC: not run: %s", why)
					continue
				}
			}
			if !z.ok {
				t.Run(m.name, func(t *testing.T) {
					vethns.NotApplicable(t, zcFeature, z.why.Error())
				})
				continue
			}
		}
		t.Run(m.name, func(t *testing.T) {
			f(t, newSpec(t, m, newDevices(t, m)))
		})
	}
}

// Sizes of the kernel suite (test_xsk.h, test_xsk.c).
const (
	defaultPktCnt     = 4 * 1024
	defaultUMEMBufs   = defaultPktCnt / 4
	defaultFrameSize  = 4096
	defaultRingSize   = 2048
	defaultBatchSize  = 64
	minPktSize        = 64
	maxEthPktSize     = 1518
	maxEthJumboSize   = 9000
	xdpPacketHeadroom = 256
	maxTXBudget       = 32
	invalidFrameSize  = maxEthJumboSize + 1
	largeFrameSize    = 3 * 1024
	maxFrameSize      = 4 * 1024
	invalidOption     = 0xffff
	umemHeadroomTest  = 128
)

// deadline bounds every wait for traffic: the kernel suite gives 3 s; a
// busy machine gets more.
const deadline = 10 * time.Second

var gMAC = [6]byte{0x55, 0x44, 0x33, 0x22, 0x11, 0x00}

// pkt is struct pkt: a packet (or, verbatim, a descriptor) of a stream.
type pkt struct {
	offset  int64
	len     uint32
	nb      uint32
	valid   bool
	options uint32
}

// stream is struct pkt_stream.
type stream struct {
	pkts     []pkt
	cur      int
	maxLen   uint32
	nbRx     int
	nbValid  int
	verbatim bool

	// The tail-adjust cases: a packet the program refused to grow is
	// dropped (gaps: the receiver skips to the packet number it finds)
	// or passed on unchanged, altLen bytes long; refused reads how many
	// the program dropped, so that the receiver knows when it is done.
	gaps      bool
	altLen    uint32
	refused   func() int
	unchanged int // packets received altLen long

	// ZC (leadZC): a batch's first packet went alone (a sending
	// stream), the stream position after it, and how far the receiver
	// is into a receiving stream.
	led     bool
	leadPos int
	rxPos   atomic.Int64
}

func (s *stream) reset() {
	s.cur, s.nbRx, s.unchanged, s.led, s.leadPos = 0, 0, 0, false, 0
	s.rxPos.Store(0)
}

// dropped is how many packets the program dropped on purpose.
func (s *stream) dropped() int {
	if s.refused == nil {
		return 0
	}
	return s.refused()
}

func genStream(n int, length uint32) *stream { return genStreamFrom(n, length, 0, 1) }

func genStreamFrom(n int, length uint32, start, step uint32) *stream {
	s := &stream{pkts: make([]pkt, n), maxLen: length}
	for i := range s.pkts {
		s.pkts[i] = pkt{len: length, nb: start + uint32(i)*step, valid: length <= maxEthJumboSize}
		if s.pkts[i].valid {
			s.nbValid++
		}
	}
	return s
}

// replaceHalf sets every odd packet to length at offset (pkt_stream_replace_half).
func replaceHalf(s *stream, length uint32, offset int64) *stream {
	c := genStream(len(s.pkts), s.pkts[0].len)
	for i := 1; i < len(c.pkts); i += 2 {
		was := c.pkts[i].valid
		c.pkts[i].offset, c.pkts[i].len, c.pkts[i].valid = offset, length, length <= maxEthJumboSize
		if was && !c.pkts[i].valid {
			c.nbValid--
		}
	}
	return c
}

// receiveHalf: a receive stream in which every odd packet is absent.
func receiveHalf(tx *stream) *stream {
	c := genStream(len(tx.pkts), tx.pkts[0].len)
	for i := 1; i < len(c.pkts); i += 2 {
		c.pkts[i].valid = false
	}
	c.nbValid /= 2
	return c
}

// custom builds the TX stream (verbatim descriptors) and the RX stream
// (whole packets) of a list of frames (pkt_stream_generate_custom).
func custom(frames []pkt) (tx, rx *stream) {
	tx, rx = &stream{verbatim: true}, &stream{}
	var payload, nb, length uint32
	for _, f := range frames {
		p := f
		p.nb = payload
		if !f.valid || f.options&xsk.OptContd == 0 {
			payload++
		}
		tx.pkts = append(tx.pkts, p)
		if p.valid {
			tx.nbValid++
			tx.maxLen = max(tx.maxLen, p.len)
		}
		if f.valid {
			length += f.len
		}
		if f.valid && f.options&xsk.OptContd != 0 {
			continue
		}
		r := pkt{offset: f.offset, len: length, nb: nb, valid: f.valid}
		rx.pkts = append(rx.pkts, r)
		if r.valid {
			rx.nbValid++
			rx.maxLen = max(rx.maxLen, r.len)
		}
		nb++
		length = 0
	}
	return tx, rx
}

// nextTX is pkt_stream_get_next_tx_pkt.
func (s *stream) nextTX() *pkt {
	if s.cur >= len(s.pkts) {
		return nil
	}
	s.cur++
	return &s.pkts[s.cur-1]
}

// nextRX is pkt_stream_get_next_rx_pkt: the next valid packet; sent
// counts the packets passed on the way.
func (s *stream) nextRX(sent *int) *pkt {
	for s.cur < len(s.pkts) {
		*sent++
		s.cur++
		if s.pkts[s.cur-1].valid {
			return &s.pkts[s.cur-1]
		}
	}
	return nil
}

// nbFrags is pkt_nb_frags.
func (s *stream) nbFrags(frameSize uint32, p *pkt) int {
	if p == nil {
		return 1
	}
	if !s.verbatim {
		if !p.valid || p.len == 0 {
			return 1
		}
		return int((p.len + frameSize - 1) / frameSize)
	}
	if p.options&xsk.OptContd == 0 || !p.valid {
		return 1
	}
	n := 1
	for i := s.cur; i < len(s.pkts); i++ {
		n++
		if s.pkts[i].options&xsk.OptContd == 0 || !s.pkts[i].valid {
			break
		}
	}
	return n
}

// side is struct ifobject: one device's UMEM, sockets and settings.
type side struct {
	ns         *vethns.NS // the namespace the device is in
	ifname     string
	frameSize  uint32
	numFrames  uint32
	headroom   uint32
	unaligned  bool
	fillSize   uint32
	compSize   uint32
	rxqSize    uint32
	batch      int
	rxOn, txOn bool
	usePoll    bool
	useFill    bool
	releaseRX  bool
	useMeta    bool
	checkCons  bool
	txBudget   uint32 // xsk.Config.MaxTXBudget

	u       *umem.UMEM
	socks   []*xsk.Socket
	streams []*stream
	macs    [][2][6]byte // per socket: source, destination
	next    uint64       // umem_alloc_buffer
	out     int          // TX frames not completed (one Completion ring)
	// The addresses of the TX frames not completed: those of valid
	// packets (out counts them), and those of invalid ones, which a
	// kernel may also hand back on the Completion ring in copy mode.
	sent, sentInvalid map[uint64]int
	prog              *progs
	link              link.Link
	xsks              *xsk.Map
	valid             func(s *side) error // validation_func
}

func (s *side) umemSize() uint64 { return uint64(s.numFrames) * uint64(s.frameSize) }

func (s *side) alloc() uint64 {
	a := s.next
	s.next += uint64(s.frameSize)
	if s.next >= s.umemSize() {
		s.next = 0
	}
	return a
}

// testSpec is struct test_spec.
type testSpec struct {
	t         *testing.T
	m         mode
	d         *devices
	tx, rx    *side
	mtu       int
	curMTU    int
	prog      progKind
	adjust    int32
	nbSockets int
	inFlight  atomic.Int64
	// heldByWire: in ZC, frames the receiver cannot take stay with the
	// sending NIC (the QEMU hub holds them for a NIC without buffers):
	// once the receiver is done, the sender stops waiting for them.
	heldByWire bool
	rxDone     atomic.Bool
	fail       atomic.Bool
	txDone     atomic.Bool
	txDefault  *stream
	rxDefault  *stream
	setupDone  bool
	receiver   *side // the receiving side of the traffic running
}

func newSpec(t *testing.T, m mode, d *devices) *testSpec {
	tc := &testSpec{t: t, m: m, d: d, mtu: maxEthPktSize, curMTU: 1500, nbSockets: 1,
		txDefault: genStream(defaultPktCnt, minPktSize), rxDefault: genStream(defaultPktCnt, minPktSize)}
	tc.tx = tc.newSide(d.tx, true)
	tc.rx = tc.newSide(d.rx, false)
	tc.tx.ns, tc.rx.ns = d.txNS, d.rxNS
	t.Cleanup(tc.clean)
	return tc
}

func (tc *testSpec) newSide(ifname string, tx bool) *side {
	s := &side{ifname: ifname, frameSize: defaultFrameSize, numFrames: defaultUMEMBufs,
		rxqSize: defaultRingSize, batch: defaultBatchSize, rxOn: !tx, txOn: tx,
		useFill: true, releaseRX: true}
	for j := 0; j < 2; j++ {
		var m [2][6]byte
		m[0], m[1] = gMAC, gMAC
		m[0][5] += byte(2 * j)
		m[1][5] += byte(2*j + 1)
		s.macs = append(s.macs, m)
		if tx {
			s.streams = append(s.streams, tc.txDefault)
		} else {
			s.streams = append(s.streams, tc.rxDefault)
		}
	}
	return s
}

// setStreams replaces socket 0's stream on both sides.
func (tc *testSpec) setStreams(tx, rx *stream) {
	tc.tx.streams[0], tc.rx.streams[0] = tx, rx
}

// clean closes what setup made, in reverse order.
func (tc *testSpec) clean() {
	var errs []error
	for _, s := range []*side{tc.tx, tc.rx} {
		for i := len(s.socks) - 1; i >= 0; i-- {
			errs = append(errs, s.socks[i].Close())
		}
		s.socks = nil
		if s.link != nil {
			errs = append(errs, s.link.Close())
			s.link = nil
		}
		if s.xsks != nil {
			errs = append(errs, s.xsks.Close())
			s.xsks = nil
		}
		if s.prog != nil {
			errs = append(errs, s.prog.Close())
			s.prog = nil
		}
		if s.u != nil {
			errs = append(errs, s.u.Close())
			s.u = nil
		}
	}
	tc.setupDone = false
	if err := errors.Join(errs...); err != nil {
		tc.t.Errorf("clean up: %v", err)
	}
}

// setup is thread_common_ops for both sides: MTU, programs, UMEMs,
// sockets, Fill rings, XSKMAPs.
func (tc *testSpec) setup() error {
	if tc.mtu != tc.curMTU {
		for _, s := range []*side{tc.tx, tc.rx} {
			if err := s.ns.Do(func() error { return xsk.SetMTU(s.ifname, tc.mtu) }); err != nil {
				return err
			}
		}
		tc.curMTU = tc.mtu
	}
	for _, s := range []*side{tc.rx, tc.tx} {
		if err := s.ns.Do(func() error { return tc.setupSide(s) }); err != nil {
			return fmt.Errorf("%s: %w", s.ifname, err)
		}
	}
	tc.setupDone = true
	return nil
}

func (tc *testSpec) setupSide(s *side) error {
	// The kernel suite attaches its program to both devices; in copy
	// mode the sending side needs none, zero-copy drivers may.
	if s.rxOn || tc.m.zc {
		p, err := loadProg(tc.prog, tc.adjust, tc.prog != progSharedUMEM)
		if err != nil {
			return err
		}
		s.prog = p
		if s.xsks, err = xsk.UseMap(p.xsks); err != nil {
			return err
		}
		ifi, err := netIndex(s.ifname)
		if err != nil {
			return err
		}
		if s.link, err = link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifi, Flags: tc.m.attach}); err != nil {
			return fmt.Errorf("attach XDP (%s): %w", tc.m.name, err)
		}
	}
	u, err := umem.New(&umem.Config{FrameSize: s.frameSize, FrameCount: s.numFrames, Headroom: s.headroom,
		Unaligned: s.unaligned, HugePages: s.unaligned})
	if err != nil {
		return err
	}
	s.u = u
	fill := s.fillSize
	if fill == 0 {
		fill = defaultRingSize
	}
	comp := s.compSize
	if comp == 0 {
		comp = defaultRingSize
	}
	rxSize, txSize := s.rxqSize, uint32(defaultRingSize)
	if s.compSize != 0 {
		txSize = s.compSize
	}
	if s.fillSize != 0 {
		rxSize = s.fillSize
	}
	cfg := &xsk.Config{RXSize: rxSize, TXSize: txSize, FillSize: fill, CompletionSize: comp,
		NoRX: !s.rxOn, NoTX: !s.txOn, Mode: tc.m.bind, MultiBuffer: tc.mtu > maxEthPktSize,
		MaxTXBudget: s.txBudget}
	for i := 0; i < tc.nbSockets; i++ {
		var sock *xsk.Socket
		if i == 0 {
			sock, err = xsk.New(s.ifname, 0, u, cfg)
		} else {
			sock, err = xsk.NewShared(s.socks[0], cfg)
		}
		if err != nil && cfg.MultiBuffer && !tc.m.zc && errors.Is(err, xsk.ErrNotSupported) {
			return &notApplicable{feature: "AF_XDP multi-buffer", err: err}
		}
		if err != nil {
			return err
		}
		s.socks = append(s.socks, sock)
	}
	if !s.rxOn {
		return nil
	}
	if err := tc.populateFill(s); err != nil {
		return err
	}
	for i, sock := range s.socks {
		if err := s.xsks.RegisterKey(i, sock); err != nil {
			return err
		}
	}
	return nil
}

// populateFill is xsk_populate_fill_ring.
func (tc *testSpec) populateFill(s *side) error {
	st := s.streams[0]
	rxFrame := s.frameSize - xdpPacketHeadroom
	n := s.numFrames
	if n >= defaultRingSize {
		n = s.fillSize
	}
	addrs := make([]uint64, 0, n)
	for uint32(len(addrs)) < n {
		var sent int
		p := st.nextRX(&sent)
		if p == nil && !s.useFill {
			break
		}
		for i := 0; i < st.nbFrags(rxFrame, p) && uint32(len(addrs)) < n; i++ {
			var a uint64
			switch {
			case p == nil:
				a = uint64(len(addrs)) * uint64(s.frameSize)
			case p.offset >= 0:
				a = uint64(p.offset)%uint64(s.frameSize) + s.alloc()
			default:
				a = uint64(p.offset + int64(s.alloc()))
			}
			addrs = append(addrs, a)
		}
	}
	if got := s.socks[0].Fill().Produce(addrs); got != len(addrs) {
		return fmt.Errorf("Fill ring took %d of %d frames", got, len(addrs))
	}
	st.reset()
	s.next = 0
	return nil
}

func (tc *testSpec) failf(format string, a ...any) error {
	tc.fail.Store(true)
	return fmt.Errorf(format, a...)
}

// validateTraffic is testapp_validate_traffic: set up (first step), send
// from tc.tx to tc.rx, check, and clean up unless keepAlive.
func (tc *testSpec) validateTraffic() error {
	if !tc.setupDone {
		if err := tc.setup(); err != nil {
			return err
		}
	}
	return tc.traffic(tc.tx, tc.rx)
}

// traffic is __testapp_validate_traffic's two threads.
func (tc *testSpec) traffic(tx, rx *side) error {
	for _, s := range append(append([]*stream{}, tx.streams...), rx.streams...) {
		if s != nil {
			s.reset()
		}
	}
	tc.inFlight.Store(0)
	tc.receiver = rx
	tx.next, tx.out = 0, 0
	tx.sent, tx.sentInvalid = map[uint64]int{}, map[uint64]int{}
	var wg sync.WaitGroup
	var rxErr, txErr error
	wg.Add(2)
	tc.rxDone.Store(false)
	go func() { defer wg.Done(); rxErr = tc.receive(rx, tx); tc.rxDone.Store(true) }()
	tc.txDone.Store(false)
	go func() { defer wg.Done(); txErr = tc.send(tx); tc.txDone.Store(true) }()
	wg.Wait()
	if err := errors.Join(txErr, rxErr); err != nil {
		// What the kernel counted, to tell a drop from a stall.
		for _, s := range []*side{tx, rx} {
			for i, sock := range s.socks {
				if st, e := sock.Stats(); e == nil {
					err = fmt.Errorf("%w\n%s socket %d: %+v", err, s.ifname, i, st)
				}
			}
			if tc.m.zc {
				_ = s.ns.Do(func() error {
					l, e := netlink.LinkByName(s.ifname)
					if e == nil && l.Attrs().Statistics != nil {
						st := l.Attrs().Statistics
						nh, e := rxNoHandler(l.Attrs().Index)
						if e != nil {
							nh = 0
						}
						err = fmt.Errorf("%w\n%s: rx %d packets, %d dropped, %d errors, %d to the stack without a handler; tx %d packets, %d dropped, %d errors",
							err, s.ifname, st.RxPackets, st.RxDropped, st.RxErrors, nh, st.TxPackets, st.TxDropped, st.TxErrors)
					}
					return nil
				})
			}
		}
		return err
	}
	if tx.valid != nil {
		if err := tx.valid(tx); err != nil {
			return err
		}
	}
	if rx.valid != nil {
		return rx.valid(rx)
	}
	return nil
}

// send is send_pkts.
func (tc *testSpec) send(s *side) error {
	done := make([]bool, tc.nbSockets)
	end := time.Now().Add(deadline)
	for {
		all := true
		for i := 0; i < tc.nbSockets; i++ {
			st := s.streams[i]
			if done[i] || st == nil || st.cur >= len(st.pkts) {
				done[i] = true
				continue
			}
			all = false
			if tc.fail.Load() {
				return errors.New("send: the receiver failed")
			}
			if time.Now().After(end) {
				return tc.failf("send: timed out with %d of %d packets sent", st.cur, len(st.pkts))
			}
			cont, err := tc.sendBatch(s, i)
			if err != nil {
				return err
			}
			if cont {
				continue
			}
			if err := tc.waitCompletion(s, s.socks[i]); err != nil {
				return err
			}
		}
		if all {
			return nil
		}
	}
}

// sendBatch is __send_pkts without the poll timeout; cont reports
// TEST_CONTINUE (paced: nothing sent).
func (tc *testSpec) sendBatch(s *side, si int) (cont bool, err error) {
	sock, st := s.socks[si], s.streams[si]
	fs := s.frameSize
	bufLen := (st.maxLen + fs - 1) / fs * fs
	if bufLen == 0 {
		bufLen = fs
	}
	// Packets the receiver never passes (invalid ones after its last
	// valid packet) stay counted: once it is done, pacing stops.
	if !tc.rxDone.Load() && tc.inFlight.Load() >= (int64(s.umemSize())-int64(s.batch)*int64(bufLen))/int64(bufLen) {
		return true, tc.kickTX(s, sock)
	}
	tx := sock.TX()
	for end := time.Now().Add(deadline); tx.Free() < s.batch; {
		if time.Now().After(end) {
			return false, tc.failf("send: TX ring stays full")
		}
		if s.usePoll {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := sock.WaitTX(ctx)
			cancel()
			if err != nil {
				return false, tc.failf("send: poll (WaitTX): %w", err)
			}
		}
		if err := tc.complete(s, sock, s.batch); err != nil {
			return false, err
		}
	}
	size := s.batch
	lead := tc.leadZC(s, si)
	if lead {
		if size = 1; st.led {
			size = s.batch - 1
			tc.awaitReceiver(tc.receiver.streams[si], st.leadPos)
		}
		st.led = !st.led
	}
	descs := make([]xsk.Desc, 0, size)
	pkts, validFrags := 0, 0
	var valid, invalid []uint64
	for len(descs) < size {
		p := st.nextTX()
		if p == nil {
			break
		}
		nf := st.nbFrags(fs, p)
		if nf > size-len(descs) {
			st.cur--
			break
		}
		written := uint32(0)
		first := len(descs)
		for left := nf; left > 0; left-- {
			var d xsk.Desc
			if !p.valid {
				d.Addr = uint64(p.offset)
			} else {
				d.Addr = uint64(p.offset + int64(s.alloc()))
			}
			switch {
			case st.verbatim:
				d.Len, d.Options = p.len, p.options
			case left > 1:
				d.Len, d.Options = fs, xsk.OptContd
			default:
				d.Len = p.len - written
			}
			if p.valid {
				tc.generate(s, si, d.Addr, d.Len, p.nb, written)
			}
			written += d.Len
			descs = append(descs, d)
			if left > 1 && st.verbatim {
				p = st.nextTX()
			}
		}
		for _, d := range descs[first:] {
			if p != nil && p.valid {
				valid = append(valid, d.Addr)
			} else {
				invalid = append(invalid, d.Addr)
			}
		}
		pkts++
		if p != nil && p.valid {
			validFrags += nf
		}
	}
	// Invalid packets count too: the receiver passes them in its stream
	// and counts them as it goes (the kernel suite counts only valid
	// ones here, so that its count falls by one per invalid packet and
	// stops pacing; a receiver slower than the sender then finds its
	// Fill ring empty).
	tc.inFlight.Add(int64(pkts))
	if lead && size == 1 {
		st.leadPos = st.cur
	}
	if n := tx.Produce(descs); n != len(descs) {
		return false, tc.failf("send: TX ring took %d of %d descriptors", n, len(descs))
	}
	s.out += validFrags
	for _, a := range valid {
		s.sent[completionKey(a)]++
	}
	for _, a := range invalid {
		s.sentInvalid[completionKey(a)]++
	}
	if s.usePoll {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := sock.WaitTX(ctx)
		cancel()
		if err != nil {
			return false, tc.failf("send: poll (WaitTX) after submit: %w", err)
		}
	}
	return false, tc.complete(s, sock, len(descs))
}

// leadZC says whether the sender s sends each batch's first packet on
// socket si alone, and the rest once the receiver has it: in ZC, for
// streams of whole packets. Between two batches a zero-copy driver may
// have no receive buffer posted: it refills its ring from the Fill ring
// when it runs, and when it last ran the frames were still with the
// receiver. QEMU's virtio-net then holds the frame that finds no buffer,
// and its hub holds the next; once buffers appear, the hub's frame goes
// first, and the two arrive swapped. A frame alone waits and arrives in
// order (a real NIC would drop it instead). The first batch after a
// bind, when the driver has taken no buffer yet, starts the same way.
func (tc *testSpec) leadZC(s *side, si int) bool {
	r := tc.receiver
	return tc.m.zc && r != nil && !s.checkCons && s.batch > 1 &&
		!s.streams[si].verbatim && r.streams[si] != nil
}

// awaitReceiver waits until the receiver is at position pos of its
// stream rx (it has the packet that went alone and gave its frames back
// to the Fill ring), or the receiver is done or failed, for at most a
// second (twice the interval at which a driver without receive buffers
// retries; a lead packet that is dropped costs that second): the wait
// paces the sender, it checks nothing.
func (tc *testSpec) awaitReceiver(rx *stream, pos int) {
	for end := time.Now().Add(time.Second); rx.rxPos.Load() < int64(pos); {
		if tc.rxDone.Load() || tc.fail.Load() || time.Now().After(end) {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// generate is pkt_generate: the Ethernet header, then payload words
// (packet number << 16 | word index), network byte order.
func (tc *testSpec) generate(s *side, si int, addr uint64, length, nb, written uint32) {
	if length < minPktSize {
		return
	}
	data := s.u.Bytes()[umem.AddOffsetToAddr(addr):]
	data = data[:length]
	if written == 0 {
		copy(data[0:6], s.macs[si][1][:])
		copy(data[6:12], s.macs[si][0][:])
		binary.BigEndian.PutUint16(data[12:], 0x9000) // ETH_P_LOOPBACK
		data, length = data[pktHdrSize:], length-pktHdrSize
	} else {
		written -= pktHdrSize
	}
	start := written / 4
	for i := uint32(0); i < length/4; i++ {
		binary.BigEndian.PutUint32(data[4*i:], nb<<16|(i+start))
	}
}

func (tc *testSpec) kickTX(s *side, sock *xsk.Socket) error {
	if !s.checkCons {
		if err := sock.KickTX(); err != nil && !errors.Is(err, unix.ENETDOWN) {
			return tc.failf("kick TX: %w", err)
		}
		return nil
	}
	// kick_tx_with_check: one sendto must take exactly the TX budget
	// when more than that is ready.
	ready := sock.TX().Pending()
	if err := sock.WakeTX(); err != nil && !errors.Is(err, unix.ENETDOWN) {
		return tc.failf("kick TX: %w", err)
	}
	if delta := ready - sock.TX().Pending(); ready > maxTXBudget && delta != maxTXBudget {
		err := tc.failf("one sendto consumed %d of %d TX descriptors, want the budget, %d", delta, ready, maxTXBudget)
		if f := sock.Features(); delta == 0 && f.NoTXBudget {
			// Before the TX budget rework that brought
			// XDP_MAX_TX_SKB_BUDGET, a sendto that stops at the budget
			// leaves the consumer index unpublished.
			return &notApplicable{feature: "XDP_MAX_TX_SKB_BUDGET", err: fmt.Errorf("%w (%s)", err, f)}
		}
		return err
	}
	return nil
}

// complete is complete_pkts.
func (tc *testSpec) complete(s *side, sock *xsk.Socket, batch int) error {
	if sock.TX().NeedWakeup() {
		if err := tc.kickTX(s, sock); err != nil {
			return err
		}
	}
	addrs := make([]uint64, max(batch, 1))
	n := sock.Completion().Consume(addrs)
	// complete_pkts fails when more frames complete than valid ones are
	// outstanding. A kernel may also return the frames of invalid
	// descriptors (Linux 6.18 does in copy mode), so the check here is
	// by address: every completion is a frame sent and not completed
	// yet, at most once; out counts the valid ones still to come.
	for _, a := range addrs[:n] {
		a = completionKey(a)
		switch {
		case s.sent[a] > 0:
			s.sent[a]--
			s.out--
		case s.sentInvalid[a] > 0:
			s.sentInvalid[a]--
		default:
			return tc.failf("too many packets completed: address %#x was not sent or already completed (%d valid frames outstanding)", a, s.out)
		}
	}
	return nil
}

// completionKey is the address a completion is matched by. Linux 6.18's
// copy mode keeps a frame's address in the skb with bit 0 as a tag and
// hands it back with that bit cleared: an odd address (possible only in
// an unaligned UMEM) completes as the even one below it.
func completionKey(addr uint64) uint64 { return addr &^ 1 }

func (tc *testSpec) waitCompletion(s *side, sock *xsk.Socket) error {
	for end := time.Now().Add(deadline); s.out > 0; {
		if tc.heldByWire && tc.rxDone.Load() {
			tc.t.Logf("ZC: %d frames held by the wire after the receiver was done", s.out)
			return nil
		}
		if time.Now().After(end) {
			return tc.failf("send: %d frames never completed", s.out)
		}
		if err := tc.complete(s, sock, s.batch); err != nil {
			return err
		}
		if s.out > 0 {
			time.Sleep(10 * time.Microsecond)
		}
	}
	return nil
}

// rxState is one receiving socket's descriptors not yet handled.
type rxState struct {
	pending []xsk.Desc
	descs   []xsk.Desc
	seen    int // releaseRX false: descriptors peeked, never released
}

// receive is receive_pkts.
func (tc *testSpec) receive(s, peer *side) error {
	states := make([]rxState, tc.nbSockets)
	for i := range states {
		states[i].descs = make([]xsk.Desc, s.batch)
	}
	end := time.Now().Add(deadline)
	for si := 0; ; si = (si + 1) % tc.nbSockets {
		if tc.allReceived(s) {
			return nil
		}
		if tc.fail.Load() {
			return errors.New("receive: the sender failed")
		}
		if time.Now().After(end) {
			return tc.failf("receive loop timed out: %s", tc.progress(s))
		}
		if err := tc.receiveBatch(s, si, &states[si]); err != nil {
			return err
		}
	}
}

func (tc *testSpec) progress(s *side) string {
	var b []byte
	for i := 0; i < tc.nbSockets; i++ {
		if st := s.streams[i]; st != nil {
			b = fmt.Appendf(b, "socket %d: %d of %d packets; ", i, st.nbRx, st.nbValid)
		}
	}
	return string(b)
}

func (tc *testSpec) allReceived(s *side) bool {
	for i := 0; i < tc.nbSockets; i++ {
		if st := s.streams[i]; st != nil && st.nbRx+st.dropped() != st.nbValid {
			return false
		}
	}
	return true
}

// receiveBatch is __receive_pkts.
func (tc *testSpec) receiveBatch(s *side, si int, rs *rxState) error {
	sock, st := s.socks[si], s.streams[si]
	if st == nil {
		return nil
	}
	if err := sock.WakeRX(); err != nil {
		return tc.failf("kick RX: %w", err)
	}
	if s.usePoll {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := sock.WaitRX(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil // TEST_CONTINUE: poll timed out
		} else if err != nil {
			return tc.failf("poll (WaitRX): %w", err)
		}
	}
	// Without releaseRX the receiver peeks and never releases, as the
	// kernel suite does: the RX ring fills up while the frames go back
	// on the Fill ring.
	var n int
	if s.releaseRX {
		n = sock.RX().Consume(rs.descs)
	} else {
		n = sock.RX().Peek(rs.descs, rs.seen)
		rs.seen += n
	}
	if n == 0 {
		time.Sleep(10 * time.Microsecond)
		return nil
	}
	rs.pending = append(rs.pending, rs.descs[:n]...)
	// Only whole packets: the frames of one whose end has not arrived
	// wait for the next batch.
	whole := len(rs.pending)
	for whole > 0 && rs.pending[whole-1].Options&xsk.OptContd != 0 {
		whole--
	}
	fill := make([]uint64, 0, whole)
	sent, nbFrags, pktLen := 0, 0, uint32(0)
	var p *pkt
	for _, d := range rs.pending[:whole] {
		orig := umem.ExtractAddr(d.Addr)
		addr := umem.AddOffsetToAddr(d.Addr)
		if nbFrags == 0 {
			if p = st.nextRX(&sent); p == nil {
				return tc.failf("received too many packets: addr %#x len %d", addr, d.Len)
			}
			if st.gaps && d.Len >= pktHdrSize+4 {
				// Skip the packets the program dropped: the next one
				// is the one whose number this packet carries.
				nb := binary.BigEndian.Uint32(s.u.Bytes()[addr+pktHdrSize:]) >> 16
				for p.nb < nb {
					if p = st.nextRX(&sent); p == nil {
						return tc.failf("packet number %d is not in the stream", nb)
					}
				}
			}
		}
		if err := tc.fragValid(s, addr, d.Len, p.nb, pktLen); err != nil {
			return fmt.Errorf("%w; the packet numbers of the frames received with it: %s", err, packetNumbers(s, rs.pending[:whole]))
		}
		if err := tc.offsetCorrect(s, p, addr); err != nil {
			return err
		}
		if s.useMeta {
			if got := binary.NativeEndian.Uint64(s.u.Bytes()[addr-xdpInfoSize:]); got != uint64(p.nb) {
				return tc.failf("metadata count %d, want %d", got, p.nb)
			}
		}
		nbFrags++
		pktLen += d.Len
		fill = append(fill, orig)
		if d.Options&xsk.OptContd != 0 {
			continue
		}
		if pktLen != p.len {
			if st.altLen == 0 || pktLen != st.altLen {
				return tc.failf("packet %d: length %d, want %d", p.nb, pktLen, p.len)
			}
			st.unchanged++
		}
		st.nbRx++
		nbFrags, pktLen = 0, 0
	}
	rs.pending = append(rs.pending[:0], rs.pending[whole:]...)
	if s.useFill {
		for end := time.Now().Add(deadline); len(fill) > 0; {
			k := sock.Fill().Produce(fill)
			fill = fill[k:]
			if len(fill) > 0 && time.Now().After(end) {
				return tc.failf("Fill ring stays full")
			}
		}
	}
	// Only now, with the frames back on the Fill ring for the driver to
	// post, may a sender waiting in awaitReceiver go on.
	st.rxPos.Store(int64(st.cur))
	if tc.inFlight.Add(-int64(sent)) < 0 {
		return tc.failf("pacing: more packets received than the sender counted in flight")
	}
	return nil
}

// packetNumbers lists the packet numbers of the frames of descs (up to
// 8 of them), to tell a packet lost from one overtaken.
func packetNumbers(s *side, descs []xsk.Desc) string {
	var b []byte
	for i, d := range descs {
		if i == 8 {
			return string(append(b, "..."...))
		}
		a := umem.AddOffsetToAddr(d.Addr)
		if d.Len < pktHdrSize+4 || a+pktHdrSize+4 > uint64(len(s.u.Bytes())) {
			b = append(b, "? "...)
			continue
		}
		b = fmt.Appendf(b, "%d ", binary.BigEndian.Uint32(s.u.Bytes()[a+pktHdrSize:])>>16)
	}
	return string(b)
}

// fragValid is is_frag_valid.
func (tc *testSpec) fragValid(s *side, addr uint64, length, nb, done uint32) error {
	size := s.umemSize()
	if addr >= size || addr+uint64(length) > size {
		return tc.failf("frag invalid: addr %#x len %d", addr, length)
	}
	if !s.unaligned && addr%uint64(s.frameSize)+uint64(length) > uint64(s.frameSize) {
		return tc.failf("frag crosses a frame boundary: addr %#x len %d", addr, length)
	}
	data := s.u.Bytes()[addr : addr+uint64(length)]
	if done == 0 {
		data = data[pktHdrSize:]
	} else {
		done -= pktHdrSize
	}
	if len(data) < 4 {
		return nil
	}
	want := done / 4
	w := binary.BigEndian.Uint32(data)
	if w>>16 != nb {
		return tc.failf("packet number %d, want %d (addr %#x)", w>>16, nb, addr)
	}
	if w&0xffff != want&0xffff {
		return tc.failf("packet %d: sequence %d at the start, want %d", nb, w&0xffff, want)
	}
	last := uint32(len(data))/4 - 1
	w = binary.BigEndian.Uint32(data[4*last:])
	if w&0xffff != (want+last)&0xffff {
		return tc.failf("packet %d: sequence %d at the end, want %d", nb, w&0xffff, want+last)
	}
	return nil
}

// offsetCorrect is is_offset_correct.
func (tc *testSpec) offsetCorrect(s *side, p *pkt, addr uint64) error {
	fs := int64(s.frameSize)
	headroom := int64(s.headroom)
	var off int64
	if s.unaligned {
		headroom = 0
		if p.valid {
			off = p.offset
		}
	}
	want := ((off+headroom+xdpPacketHeadroom)%fs + fs) % fs
	if got := int64(addr % uint64(fs)); got != want {
		return tc.failf("packet %d: offset %d in its frame, want %d", p.nb, got, want)
	}
	return nil
}

// stats reads a socket's XDP_STATISTICS after a kick (kick_rx, getsockopt).
func stats(s *side) (xsk.Stats, error) {
	sock := s.socks[0]
	if s.rxOn {
		if err := sock.WakeRX(); err != nil {
			return xsk.Stats{}, err
		}
	}
	return sock.Stats()
}

// setupOnly sets up the side s alone (the single-thread cases).
func (tc *testSpec) setupOnly(s *side) error {
	if err := s.ns.Do(func() error { return tc.setupSide(s) }); err != nil {
		return err
	}
	tc.setupDone = true
	return nil
}

// needHugePages makes sure n free 2 MiB huge pages exist, raising
// vm.nr_hugepages for the test (and putting it back) when they do not.
func needHugePages(t *testing.T, n int) {
	t.Helper()
	free := func() int {
		b, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "HugePages_Free:"); ok {
				k, _ := strconv.Atoi(strings.TrimSpace(v))
				return k
			}
		}
		return 0
	}
	have := free()
	if have >= n {
		return
	}
	const knob = "/proc/sys/vm/nr_hugepages"
	b, err := os.ReadFile(knob)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := os.WriteFile(knob, []byte(strconv.Itoa(old+n-have)), 0); err != nil {
		t.Fatalf("reserve huge pages: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, []byte(strconv.Itoa(old)), 0); err != nil {
			t.Errorf("give back huge pages: %v", err)
		}
	})
	if got := free(); got < n {
		t.Fatalf("%d free 2 MiB huge pages after raising vm.nr_hugepages, need %d", got, n)
	}
}
