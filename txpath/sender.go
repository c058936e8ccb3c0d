package txpath

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"time"

	"github.com/xdpkit/xdpkit/nt"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Defaults of Config.
const (
	DefaultBatchSize = 64
	// DefaultMaxPacket is the largest packet with multi-buffer: a 9000-byte
	// MTU jumbo frame plus Ethernet and VLAN headers, with room to spare.
	DefaultMaxPacket = 9216
)

// Config configures a Sender. A nil *Config means all defaults.
type Config struct {
	// Policy is the default copy and checksum policy (like ethtool's
	// tx-nocache-copy, per interface); Auto chooses from the device facts.
	Policy Policy
	// BatchSize is how many descriptors are queued before they are
	// submitted with one producer-index store and one kick; default 64.
	// Flush submits a partial batch.
	BatchSize int
	// Headroom leaves this many bytes free at the start of every frame, in
	// front of the TX metadata area; a multiple of 8, default 0. The
	// packet starts at frame + Headroom + UMEM TxMetadataLen.
	Headroom uint32
	// MaxPacket is the largest packet accepted, in bytes. Default: one
	// frame without multi-buffer, DefaultMaxPacket with it.
	MaxPacket int
	// NTThreshold overrides the payload size from which the Offload
	// policy uses NT stores: 0 takes it from nt's calibration (zero-copy
	// sockets only; copy mode never uses NT stores), a negative value
	// means never.
	NTThreshold int
	// Device overrides the probed device facts (for tests and for devices
	// whose driver misreports).
	Device *Device
}

// Options are per-send settings. The zero value uses the Sender's policy.
type Options struct {
	// Policy overrides the Sender's policy for this send (like
	// MSG_NTCOPY): NT for data the CPU will not read again, Software to
	// keep a payload in cache, ... Auto means the Sender's policy.
	Policy Policy
	// Checksum asks Commit and SendFrame to fill the IPv4 header checksum
	// and the UDP or TCP checksum of the frame, by offload or in software
	// according to the policy. The frame must then be Ethernet (up to two
	// VLAN tags) + IPv4 without fragmentation or IPv6 without extension
	// headers + UDP or TCP, with lengths that agree with the frame.
	// SendUDP always fills its checksums.
	Checksum bool
}

// Stats count what a Sender did.
type Stats struct {
	Packets    uint64 // packets queued
	Bytes      uint64 // bytes of those packets
	Descs      uint64 // descriptors queued (> Packets with multi-buffer)
	Batches    uint64 // Flushes that submitted descriptors
	Kicks      uint64 // kick attempts (each a sendto only when needed)
	KicksAgain uint64 // kicks answered EAGAIN/EBUSY/ENOBUFS
	Completed  uint64 // frames reaped from the completion ring
	Offloaded  uint64 // packets with a checksum offload request
	NTCopies   uint64 // packets whose payload was copied with NT stores
	Fences     uint64 // nt.Fence calls
}

// Frame is a UMEM frame reserved by Next for one packet. The application
// writes the packet into Buf, from Buf[0], and passes the Frame and the
// packet's length to Commit, or gives it back with Release.
type Frame struct {
	// Buf is the writable memory of the frame: from the packet start
	// (after the headroom and the TX metadata area) to the frame's end.
	Buf  []byte
	addr uint64 // UMEM address of Buf[0]
}

// Addr is the frame's UMEM address (of Buf[0]).
func (f Frame) Addr() uint64 { return f.addr }

// Sender writes packets straight into UMEM frames and sends them through
// an AF_XDP socket's TX ring in batches. It is not safe for concurrent use:
// like the rings it drives, one goroutine at a time.
type Sender struct {
	u   *umem.UMEM
	p   port
	dec Decision

	batch     int
	dataOff   uint64 // packet start inside a frame
	chunkCap  int    // packet bytes one frame holds
	maxChain  int
	maxPacket int
	meta      bool
	sg        bool
	zc        bool // zero-copy: the driver sends after a kick returns
	swCsum    bool // the UMEM has XDP_UMEM_TX_SW_CSUM
	auto      bool // Auto policy with the calibrated NT threshold: SendUDP asks ChooseCopy

	cache  []uint64   // free frames taken from the UMEM (state Held)
	held   []uint64   // frames handed out by Next
	descs  []xsk.Desc // queued, not yet on the ring
	reaped []uint64
	segs   [][]byte // the chain of the packet being built
	chain  []uint64

	ringRoom int      // TX ring entries free at the last look, minus what we used since
	inflight int      // frames on the TX ring, not yet completed
	lent     []uint64 // bitmap by frame index: on the TX ring, not completed
	shift    uint     // log2 of the frame size
	ntDirty  bool
	closed   bool
	pending  error // a failed automatic flush, for the next send or Flush
	stats    Stats
}

// New returns a Sender on the TX ring of sock, with frames from its UMEM.
// It probes the device facts (unless cfg.Device is set) and resolves the
// Auto policy; Decision reports the choice and its reasons. A socket
// whose Completion ring serves other sockets too
// (xsk.Socket.SharesRings) or whose UMEM is unaligned is refused with
// ErrConfig.
func New(sock *xsk.Socket, cfg *Config) (*Sender, error) {
	if sock == nil || sock.TX() == nil {
		return nil, fmt.Errorf("%w: socket without a TX ring", ErrConfig)
	}
	if sock.SharesRings() {
		return nil, fmt.Errorf("%w: socket shares its Completion ring with other sockets (xsk.NewShared: drive its rings directly)", ErrConfig)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Device == nil && (c.Policy == Auto || c.Policy == Offload || c.Policy == NT) {
		d, err := ProbeDevice(sock.Ifname(), sock.ZeroCopy())
		if err != nil {
			return nil, err
		}
		c.Device = &d
	}
	p := &sockPort{s: sock, tx: sock.TX(), comp: sock.Completion()}
	return newSender(sock.UMEM(), p, sock.ZeroCopy(), sock.MultiBuffer(), &c, sock.TX().Size(), sock.Completion().Size())
}

func newSender(u *umem.UMEM, p port, zc, sg bool, c *Config, txSize, compSize int) (*Sender, error) {
	if u.Unaligned() {
		return nil, fmt.Errorf("%w: an unaligned UMEM (drive its rings directly)", ErrConfig)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchSize < 1 || c.BatchSize > txSize {
		return nil, fmt.Errorf("%w: batch size %d with a %d-entry TX ring", ErrConfig, c.BatchSize, txSize)
	}
	if c.Headroom%8 != 0 {
		return nil, fmt.Errorf("%w: headroom %d is not a multiple of 8", ErrConfig, c.Headroom)
	}
	dataOff := uint64(c.Headroom) + uint64(u.TxMetadataLen())
	chunkCap := int(u.FrameSize()) - int(dataOff)
	if chunkCap < 128 {
		return nil, fmt.Errorf("%w: headroom %d and metadata %d leave %d bytes of a %d-byte frame",
			ErrConfig, c.Headroom, u.TxMetadataLen(), chunkCap, u.FrameSize())
	}
	if c.MaxPacket == 0 {
		c.MaxPacket = chunkCap
		if sg {
			c.MaxPacket = DefaultMaxPacket
		}
	}
	if c.MaxPacket < 64 || (!sg && c.MaxPacket > chunkCap) {
		return nil, fmt.Errorf("%w: max packet %d (one frame holds %d, multi-buffer %v)", ErrConfig, c.MaxPacket, chunkCap, sg)
	}
	maxChain := (c.MaxPacket + chunkCap - 1) / chunkCap
	// Copy mode builds one skb of at most MAX_SKB_FRAGS+1 (18) buffers and
	// drops longer chains as invalid descriptors.
	if maxChain > maxCopyChain && !zc || maxChain > txSize || maxChain > int(u.FrameCount()) {
		return nil, fmt.Errorf("%w: max packet %d needs %d frames", ErrConfig, c.MaxPacket, maxChain)
	}
	var dev Device
	if c.Device != nil {
		dev = *c.Device
	}
	meta := u.TxMetadataLen() >= umem.TxMetadataSize
	threshold := func() int {
		switch {
		case c.NTThreshold < 0:
			return 0
		case c.NTThreshold > 0:
			return c.NTThreshold
		}
		return max(nt.Default().Threshold, 0)
	}
	dec, err := decideUMEM(c.Policy, zc, meta, u.TxSwCsum(), dev, threshold, nil)
	if err != nil {
		return nil, err
	}
	if !zc && c.NTThreshold > 0 {
		// An explicit threshold applies in copy mode too (for measuring).
		dec.NTFrom = c.NTThreshold
		dec.Reason += fmt.Sprintf("; NT threshold %d B configured", c.NTThreshold)
	}
	s := &Sender{
		u:         u,
		p:         p,
		dec:       dec,
		batch:     c.BatchSize,
		dataOff:   dataOff,
		chunkCap:  chunkCap,
		maxChain:  maxChain,
		maxPacket: c.MaxPacket,
		meta:      meta,
		sg:        sg,
		zc:        zc,
		swCsum:    u.TxSwCsum(),
		auto:      c.Policy == Auto && c.NTThreshold == 0,
		cache:     make([]uint64, 0, c.BatchSize+maxChain),
		held:      make([]uint64, 0, c.BatchSize),
		descs:     make([]xsk.Desc, 0, c.BatchSize+maxChain),
		reaped:    make([]uint64, min(compSize, 1024)),
		segs:      make([][]byte, maxChain),
		chain:     make([]uint64, maxChain),
		lent:      make([]uint64, (u.FrameCount()+63)/64),
		shift:     uint(bits.TrailingZeros32(u.FrameSize())),
	}
	if s.auto && zc {
		// Measure what ChooseCopy needs now, not on the first packet.
		// Copy mode needs no measurement (autoCopy), so a copy-mode
		// Sender starts at once.
		Prepare()
	}
	return s, nil
}

// Decision reports the Sender's default policy and why it was chosen.
func (s *Sender) Decision() Decision { return s.dec }

// Stats returns the Sender's counters.
func (s *Sender) Stats() Stats { return s.stats }

// InFlight is the number of frames on the TX ring whose completion has
// not been reaped yet.
func (s *Sender) InFlight() int { return s.inflight }

// Queued is the number of descriptors queued for the next Flush.
func (s *Sender) Queued() int { return len(s.descs) }

// FrameCap is how many packet bytes one UMEM frame holds.
func (s *Sender) FrameCap() int { return s.chunkCap }

// reap moves completed frames back to the UMEM allocator.
func (s *Sender) reap() error {
	for {
		n := s.p.consume(s.reaped)
		if n == 0 {
			return nil
		}
		s.inflight -= n
		s.stats.Completed += uint64(n)
		for _, a := range s.reaped[:n] {
			if i := a >> s.shift; i/64 < uint64(len(s.lent)) {
				s.lent[i/64] &^= 1 << (i % 64)
			}
		}
		if err := s.u.PutBatch(s.reaped[:n]); err != nil {
			return fmt.Errorf("txpath: completion: %w", err)
		}
		if n < len(s.reaped) {
			return nil
		}
	}
}

// room makes sure k frames and k TX ring entries (beyond those already
// promised) are available, without writing anything.
func (s *Sender) room(k int) error {
	if s.closed {
		return os.ErrClosed
	}
	if err := s.takePending(); err != nil {
		return err // before anything of this send is queued
	}
	if need := len(s.descs) + len(s.held) + k; s.ringRoom < need {
		s.ringRoom = s.p.txFree()
		if s.ringRoom < need && len(s.descs) > 0 {
			if err := s.flush(); err != nil {
				return err
			}
			s.ringRoom = s.p.txFree()
		}
		if s.ringRoom < len(s.descs)+len(s.held)+k {
			if s.p.closed() {
				return fmt.Errorf("txpath: socket: %w", os.ErrClosed)
			}
			return ErrRingFull
		}
	}
	if len(s.cache) < k {
		if err := s.reap(); err != nil {
			return err
		}
		s.cache = s.cache[:len(s.cache)+s.u.GetBatch(s.cache[len(s.cache):cap(s.cache)])]
		if len(s.cache) < k {
			return s.noFrames()
		}
	}
	return nil
}

// errFramesOnFill is ErrNoFrames when the Sender has no frame in flight
// and the UMEM none free or on a TX ring: every frame is on Fill rings or
// held by the application, and no completion will bring one back. It is
// made once, so that the error path allocates nothing either.
var errFramesOnFill = fmt.Errorf("%w, and none in flight: every frame is on a Fill ring or held "+
	"(see umem.Accounting); give the UMEM more frames than its Fill rings take, "+
	"or lower rxpath.Config.FillFrames", ErrNoFrames)

// noFrames is the error of a send that found no free frame.
func (s *Sender) noFrames() error {
	if s.inflight == 0 && len(s.descs) == 0 {
		if a := s.u.Accounting(); a.Free == 0 && a.TX == 0 {
			return errFramesOnFill
		}
	}
	return ErrNoFrames
}

// take pops a free frame; room must have promised it.
func (s *Sender) take() uint64 {
	a := s.cache[len(s.cache)-1]
	s.cache = s.cache[:len(s.cache)-1]
	return a
}

// Next reserves a frame for a packet that the application writes in place.
// It fails with ErrNoFrames or ErrRingFull when none is available now (see
// Wait). At most BatchSize frames may be reserved at a time.
func (s *Sender) Next() (Frame, error) {
	if len(s.held) == cap(s.held) {
		return Frame{}, fmt.Errorf("%w: %d frames reserved and not committed", ErrBadFrame, len(s.held))
	}
	if err := s.room(1); err != nil {
		return Frame{}, err
	}
	base := s.take()
	s.held = append(s.held, base)
	a := base + s.dataOff
	return Frame{Buf: s.u.Frame(a), addr: a}, nil
}

// unhold forgets a frame reserved by Next and reports whether it was.
func (s *Sender) unhold(f Frame) bool {
	base := s.u.Base(f.addr)
	if f.addr != base+s.dataOff {
		return false
	}
	for i := len(s.held) - 1; i >= 0; i-- {
		if s.held[i] == base {
			s.held[i] = s.held[len(s.held)-1]
			s.held = s.held[:len(s.held)-1]
			return true
		}
	}
	return false
}

// Release gives back a frame reserved by Next without sending it.
func (s *Sender) Release(f Frame) error {
	if !s.unhold(f) {
		return fmt.Errorf("%w: %#x not reserved", ErrBadFrame, f.addr)
	}
	if len(s.cache) == cap(s.cache) { // never grow the cache: no allocation
		return s.u.Put(f.addr)
	}
	s.cache = append(s.cache, s.u.Base(f.addr))
	return nil
}

// Commit queues the n-byte packet written into f.Buf. With
// opts.Checksum it fills the packet's checksums first (see Options). On
// error nothing is queued and the frame is given back as Release would:
// nothing stays reserved, and f must not be used again.
func (s *Sender) Commit(f Frame, n int, opts Options) error {
	if !s.isHeld(f) {
		return fmt.Errorf("%w: %#x not reserved", ErrBadFrame, f.addr)
	}
	err := s.commit(f, n, opts)
	if err != nil {
		if rerr := s.Release(f); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// isHeld reports whether f was reserved by Next and not committed or
// released since.
func (s *Sender) isHeld(f Frame) bool {
	base := s.u.Base(f.addr)
	if f.addr != base+s.dataOff {
		return false
	}
	for _, h := range s.held {
		if h == base {
			return true
		}
	}
	return false
}

// commit is Commit of a reserved frame, leaving it reserved on error.
func (s *Sender) commit(f Frame, n int, opts Options) error {
	if n <= 0 || n > s.chunkCap {
		return fmt.Errorf("%w: length %d (a frame holds %d)", ErrBadFrame, n, s.chunkCap)
	}
	var opt uint32
	if opts.Checksum {
		pol, err := s.policy(opts.Policy)
		if err != nil {
			return err
		}
		s.segs[0] = s.u.Frame(f.addr)[:n]
		offload, err := s.fillChecksums(f.addr, s.segs[:1], n, pol, true)
		if err != nil {
			return err
		}
		if offload {
			opt = xsk.OptTxMetadata
		}
	}
	s.unhold(f)
	s.descs = append(s.descs, xsk.Desc{Addr: f.addr, Len: uint32(n), Options: opt})
	s.queued(1, n, opt != 0, false)
	s.autoFlush()
	return nil
}

// queued counts a packet appended to descs.
func (s *Sender) queued(descs, n int, offload, ntCopy bool) {
	s.stats.Packets++
	s.stats.Descs += uint64(descs)
	s.stats.Bytes += uint64(n)
	if offload {
		s.stats.Offloaded++
	}
	if ntCopy {
		s.stats.NTCopies++
		s.ntDirty = true
	}
}

// policy resolves a per-send policy and checks that it can be used.
func (s *Sender) policy(p Policy) (Policy, error) {
	switch p {
	case Auto:
		return s.dec.Policy, nil
	case Offload:
		if !s.meta {
			return p, ErrNoMetadata
		}
		if !s.dec.CanOffload && !s.dec.Unfinished {
			return p, fmt.Errorf("%w: checksum offload on this socket", ErrNotSupported)
		}
	case Software, NT, Plain:
	default:
		return p, fmt.Errorf("%w: %d", ErrPolicy, int(p))
	}
	return p, nil
}

// Flush submits the queued descriptors with one producer-index store,
// after one nt.Fence if any payload was copied with NT stores, kicks the
// kernel if it asked for a wake-up (again, a bounded number of times,
// while copy mode leaves descriptors on the ring), and reaps completions.
// A device that stays busy can leave descriptors on the TX ring after
// Flush returns; a Flush with nothing queued kicks again. A program that
// sends from a poll loop calls Flush at the end of every round, an idle
// one too (rxpath.RoundEnder), so that no frame waits on the ring for
// the next packet to be sent.
func (s *Sender) Flush() error {
	if s.closed {
		return os.ErrClosed
	}
	err := s.flush()
	if perr := s.takePending(); err == nil {
		err = perr
	}
	return err
}

// autoFlush submits a full batch after a packet was queued. The packet
// stays queued whatever happens, so a failure is not that send's to
// return (a caller would send the packet twice): it is kept for the next
// send or Flush to report.
func (s *Sender) autoFlush() {
	if len(s.descs) >= s.batch {
		if err := s.flush(); err != nil && s.pending == nil {
			s.pending = err
		}
	}
}

// takePending returns and clears the error autoFlush kept.
func (s *Sender) takePending() error {
	err := s.pending
	s.pending = nil
	return err
}

func (s *Sender) flush() error {
	if len(s.descs) > 0 {
		if s.ntDirty {
			nt.Fence() // NT stores before the producer index store
			s.ntDirty = false
			s.stats.Fences++
		}
		n := s.p.produce(s.descs)
		for _, d := range s.descs[:n] {
			i := d.Addr >> s.shift
			s.lent[i/64] |= 1 << (i % 64)
		}
		// room() promised ring entries for every queued descriptor, so n
		// is all of them; keep any rest for the next Flush regardless.
		frames := n
		s.inflight += frames
		s.ringRoom -= n
		if n > 0 {
			s.stats.Batches++
		}
		s.descs = s.descs[:copy(s.descs, s.descs[n:])]
	}
	if err := s.kick(); err != nil {
		return err
	}
	return s.reap()
}

// kick wakes the kernel while it has descriptors to take and says it
// stopped early (copy mode sends at most its TX budget, 32 frames by
// default, per system call). In copy mode the kernel sends in the
// system call, so descriptors still on the ring after a kick that did
// not say so were left too: older kernels stop without an error when the
// completion ring is full. Zero-copy drivers send after the call
// returns: there a kick that did not say EAGAIN is not repeated. Bounded;
// what a busy device still refuses stays on the ring for the next Flush.
func (s *Sender) kick() error {
	limit := s.p.txPending()/16 + 2
	for i := 0; i < limit && s.p.txPending() > 0; i++ {
		s.stats.Kicks++
		again, err := s.p.kick()
		if err != nil {
			return fmt.Errorf("txpath: kick: %w", err)
		}
		if again {
			s.stats.KicksAgain++
		} else if s.zc {
			return nil
		}
		// The kernel may have stopped because the completion ring is
		// full: make room before kicking again.
		if err := s.reap(); err != nil {
			return err
		}
	}
	return nil
}

// Wait blocks until a frame and a TX ring entry are available for the next
// packet, or ctx ends (returning ctx.Err()). It flushes what is queued,
// kicks the kernel and reaps completions while it waits; it sleeps between
// polls (from 20 µs up to 1 ms) without holding an OS thread.
func (s *Sender) Wait(ctx context.Context) error {
	if err := s.takePending(); err != nil {
		return err
	}
	var closed error
	err := s.waitFor(ctx, func() bool {
		err := s.room(1)
		if errors.Is(err, os.ErrClosed) || s.pending != nil {
			closed = errors.Join(err, s.takePending())
			return true
		}
		return err == nil
	})
	if closed != nil {
		return closed
	}
	return err
}

// Drain flushes and waits until the kernel has completed every frame sent,
// or ctx ends.
func (s *Sender) Drain(ctx context.Context) error {
	if s.closed {
		return os.ErrClosed
	}
	if err := s.flush(); err != nil {
		return err
	}
	if s.p.closed() {
		// Nothing more will complete; Reclaim takes the frames back.
		return fmt.Errorf("txpath: socket: %w", os.ErrClosed)
	}
	return s.waitFor(ctx, func() bool { return len(s.descs) == 0 && s.inflight == 0 || s.p.closed() })
}

func (s *Sender) waitFor(ctx context.Context, ready func() bool) error {
	delay := 20 * time.Microsecond
	for {
		if s.closed {
			return os.ErrClosed
		}
		if err := s.flush(); err != nil {
			return err
		}
		if ready() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, time.Millisecond)
	}
}

// Close drains the Sender for up to one second and gives its frames back
// to the UMEM: the free ones it holds, the ones reserved by Next and not
// committed, and those completed. Frames the kernel has not completed by
// then stay with it (ErrInFlight) until the socket is closed, which gives
// them back (as Reclaim does). Close does not close the socket, and may
// come before or after the socket's Close: after it, nothing is drained
// and every frame is given back at once. Close is idempotent.
func (s *Sender) Close() error {
	if s.closed {
		return nil
	}
	// Reserved frames are not sent.
	s.cache = append(s.cache, s.held...)
	s.held = s.held[:0]
	var err error
	if !s.p.closed() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = s.Drain(ctx)
		cancel()
	}
	s.closed = true
	// Queued and never submitted (the drain failed): not sent.
	for _, d := range s.descs {
		s.cache = append(s.cache, s.u.Base(d.Addr))
	}
	s.descs = s.descs[:0]
	if perr := s.u.PutBatch(s.cache); perr != nil {
		err = errors.Join(err, perr)
	}
	s.cache = s.cache[:0]
	if s.p.closed() {
		_, rerr := s.Reclaim()
		return errors.Join(err, rerr)
	}
	if s.inflight > 0 {
		err = errors.Join(err, fmt.Errorf("%w: %d", ErrInFlight, s.inflight))
		if oc, ok := s.p.(interface{ onClose(func()) }); ok {
			oc.onClose(func() { _, _ = s.Reclaim() })
		}
	}
	return err
}

// ErrSocketOpen is returned by Reclaim while the socket is open.
var ErrSocketOpen = errors.New("txpath: socket still open")

// Reclaim gives back to the UMEM allocator the frames the kernel took off
// the TX ring and never completed, as happens when the interface went
// away. The kernel may still complete them while the socket is open, so
// Reclaim fails with ErrSocketOpen until the socket is closed. It returns
// how many frames it gave back.
func (s *Sender) Reclaim() (int, error) {
	if !s.p.closed() {
		return 0, ErrSocketOpen
	}
	n := 0
	var errs []error
	for w, word := range s.lent {
		for word != 0 {
			b := uint64(bits.TrailingZeros64(word))
			word &^= 1 << b
			addr := (uint64(w)*64 + b) << s.shift
			s.u.Moved(umem.TX, umem.Held, 1)
			if err := s.u.Put(addr); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
		s.lent[w] = 0
	}
	s.inflight = 0
	return n, errors.Join(errs...)
}

// maxCopyChain is the longest multi-buffer chain copy mode accepts:
// MAX_SKB_FRAGS (17 by default) plus the linear part.
const maxCopyChain = 18
