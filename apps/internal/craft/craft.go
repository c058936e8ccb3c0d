package craft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"

	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/csum"
)

// ErrConfig is returned by New and the parsers for a configuration that
// cannot be built.
var ErrConfig = errors.New("craft: bad config")

// Mode is the kind of frame a Builder makes.
type Mode uint8

// The modes.
const (
	UDP Mode = iota
	TCPSyn
	ICMPEcho
	Raw
)

var modeNames = [...]string{UDP: "udp", TCPSyn: "tcp-syn", ICMPEcho: "icmp-echo", Raw: "raw"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses udp, tcp-syn, icmp-echo or raw.
func ParseMode(s string) (Mode, error) {
	for m, n := range modeNames {
		if n == s {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("%w: mode %q: want udp, tcp-syn, icmp-echo or raw", ErrConfig, s)
}

// Order is the order in which the field engine walks its ranges.
type Order uint8

// The orders.
const (
	Sequential Order = iota
	Random
)

// ParseOrder parses sequential or random.
func ParseOrder(s string) (Order, error) {
	switch s {
	case "sequential", "seq":
		return Sequential, nil
	case "random":
		return Random, nil
	}
	return 0, fmt.Errorf("%w: order %q: want sequential or random", ErrConfig, s)
}

// PortRange is an inclusive range of ports.
type PortRange struct{ First, Last uint16 }

// ParsePortRange parses "N" or "N-M" (1 <= N <= M <= 65535).
func ParsePortRange(s string) (PortRange, error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if !isRange {
		b = a
	}
	x, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 16)
	y, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 16)
	if err1 != nil || err2 != nil || x == 0 || y < x {
		return PortRange{}, fmt.Errorf("%w: port range %q: want N or N-M, 1 <= N <= M <= 65535", ErrConfig, s)
	}
	return PortRange{uint16(x), uint16(y)}, nil
}

// ParseVLANs parses a comma-separated list of one or two VLAN IDs
// (1..4094), outer first.
func ParseVLANs(s string) ([]uint16, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: -vlan %q: at most two tags (QinQ)", ErrConfig, s)
	}
	var ids []uint16
	for _, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || v < 1 || v > 4094 {
			return nil, fmt.Errorf("%w: -vlan %q: VLAN IDs are 1..4094", ErrConfig, s)
		}
		ids = append(ids, uint16(v))
	}
	return ids, nil
}

// ParsePrefix parses an address (a one-address range) or a prefix
// 198.18.1.0/24, 2001:db8::/120. The address as written is returned too:
// the one to route by.
func ParsePrefix(s string) (netip.Prefix, netip.Addr, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, netip.Addr{}, fmt.Errorf("%w: %q: not an address or prefix", ErrConfig, s)
		}
		a := p.Addr().Unmap()
		bitsLen := p.Bits()
		if p.Addr().Is4In6() {
			bitsLen -= 96
		}
		if bitsLen < 0 {
			return netip.Prefix{}, netip.Addr{}, fmt.Errorf("%w: %q: not an IPv4 prefix", ErrConfig, s)
		}
		return netip.PrefixFrom(a, bitsLen).Masked(), a, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("%w: %q: not an address or prefix", ErrConfig, s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), a, nil
}

// Config describes the frames of a Builder.
type Config struct {
	Mode           Mode
	SrcMAC, DstMAC [6]byte
	VLANs          []uint16 // 0, 1 or 2 tags, outer first
	EtherType      uint16   // Raw
	Pattern        []byte   // Raw's payload, repeated (default: bytes 0, 1, 2, ...)

	Src, Dst           netip.Prefix // both IPv4 or both IPv6 (not Raw)
	SrcPorts, DstPorts PortRange    // (not Raw); ICMP echo takes its identifier from SrcPorts
	Order              Order
	Seed               uint64
	TTL                uint8 // 0: 64
	MTU                int   // for TCP's MSS; 0: 1500
	Sizes              []int // frame lengths without FCS, cycled (not TCPSyn)
	Flow               uint16

	// Start and Stride split a sequential walk between Builders: this
	// one makes combinations Start, Start+Stride, ... (Stride 0 means 1).
	// Several senders with the same config and Start 0..Stride-1 cover
	// every combination once per round between them.
	Start, Stride int
}

// Builder makes frames. It is not safe for concurrent use.
type Builder struct {
	mode   Mode
	v6     bool
	tmpl   []byte // the headers; Raw: a whole frame of the largest size
	l3, l4 int    // offsets of the IP and L4 headers
	hdrLen int    // headers up to the payload (TCP: the whole frame)
	sizes  []int
	k      int
	maxLen int
	pat    []byte // UDP and ICMP payload source
	flow   uint16

	// The field engine: sport, dport, src, dst. An address field's
	// index is 128 bits, idxHi:idx, below 2^host bits: mask:maskHi+1.
	n      [4]uint64 // range sizes; 0 means 2^64 or more
	idx    [4]uint64
	idxHi  [4]uint64
	mask   [4]uint64 // address fields: the host bits' low 64
	maskHi [4]uint64 // ... and high 64 (IPv6 prefixes shorter than /64)
	order  Order
	stride int
	rng    rand.PCG
	sport  uint16
	dport  uint16
	src    [16]byte // base addresses (IPv4 in the first 4 bytes)
	dst    [16]byte

	seq   uint64 // frames built
	tsval uint32
}

// Field engine indexes.
const (
	fSport = iota
	fDport
	fSrc
	fDst
)

// Header lengths.
const (
	ethLen  = 14
	ipv4Len = 20
	ipv6Len = 40
	udpLen  = 8
	tcpLen  = 40 // 20 + 20 bytes of options
	icmpLen = 8
)

// New validates cfg and returns its Builder.
func New(cfg *Config) (*Builder, error) {
	b := &Builder{mode: cfg.Mode, order: cfg.Order, flow: cfg.Flow}
	if cfg.Mode > Raw {
		return nil, fmt.Errorf("%w: mode %d", ErrConfig, cfg.Mode)
	}
	if len(cfg.VLANs) > 2 {
		return nil, fmt.Errorf("%w: at most two VLAN tags", ErrConfig)
	}
	b.rng.Seed(cfg.Seed+uint64(cfg.Start), cfg.Seed^0x9e3779b97f4a7c15)
	b.stride = max(cfg.Stride, 1)
	if cfg.Start < 0 || cfg.Stride < 0 {
		return nil, fmt.Errorf("%w: start %d, stride %d", ErrConfig, cfg.Start, cfg.Stride)
	}
	l2 := ethLen + 4*len(cfg.VLANs)
	h := make([]byte, l2)
	copy(h[0:], cfg.DstMAC[:])
	copy(h[6:], cfg.SrcMAC[:])
	tpids := []uint16{0x8100}
	if len(cfg.VLANs) == 2 {
		tpids = []uint16{0x88a8, 0x8100}
	}
	for i, id := range cfg.VLANs {
		if id < 1 || id > 4094 {
			return nil, fmt.Errorf("%w: VLAN ID %d: want 1..4094", ErrConfig, id)
		}
		binary.BigEndian.PutUint16(h[12+4*i:], tpids[i])
		binary.BigEndian.PutUint16(h[14+4*i:], id)
	}
	b.l3 = l2
	b.sizes = cfg.Sizes
	if cfg.Mode == Raw {
		if cfg.EtherType < 0x0600 {
			return nil, fmt.Errorf("%w: EtherType %#04x: below 0x0600 it is a length", ErrConfig, cfg.EtherType)
		}
		binary.BigEndian.PutUint16(h[l2-2:], cfg.EtherType)
		if err := b.checkSizes(l2); err != nil {
			return nil, err
		}
		pat := cfg.Pattern
		if len(pat) == 0 {
			pat = make([]byte, 256)
			for i := range pat {
				pat[i] = byte(i)
			}
		}
		b.tmpl = make([]byte, b.maxLen)
		copy(b.tmpl, h)
		for i := l2; i < b.maxLen; i++ {
			b.tmpl[i] = pat[(i-l2)%len(pat)]
		}
		b.hdrLen = l2
		b.l4 = l2
		return b, nil
	}

	src, dst := cfg.Src.Masked(), cfg.Dst.Masked()
	if !src.IsValid() || !dst.IsValid() || src.Addr().Is4() != dst.Addr().Is4() {
		return nil, fmt.Errorf("%w: source %v and destination %v: want two prefixes of one family", ErrConfig, src, dst)
	}
	for _, r := range []PortRange{cfg.SrcPorts, cfg.DstPorts} {
		if r.First == 0 || r.Last < r.First {
			return nil, fmt.Errorf("%w: port range %d-%d", ErrConfig, r.First, r.Last)
		}
	}
	b.v6 = src.Addr().Is6()
	b.sport, b.dport = cfg.SrcPorts.First, cfg.DstPorts.First
	b.n[fSport] = uint64(cfg.SrcPorts.Last-cfg.SrcPorts.First) + 1
	b.n[fDport] = uint64(cfg.DstPorts.Last-cfg.DstPorts.First) + 1
	b.n[fSrc], b.n[fDst] = rangeLen(src), rangeLen(dst)
	b.mask[fSrc], b.maskHi[fSrc] = hostMask(src)
	b.mask[fDst], b.maskHi[fDst] = hostMask(dst)
	if b.v6 {
		b.src, b.dst = src.Addr().As16(), dst.Addr().As16()
	} else {
		s4, d4 := src.Addr().As4(), dst.Addr().As4()
		copy(b.src[:], s4[:])
		copy(b.dst[:], d4[:])
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = 64
	}
	var proto uint8
	var l4len int
	switch cfg.Mode {
	case UDP:
		proto, l4len = csum.ProtoUDP, udpLen
	case TCPSyn:
		proto, l4len = csum.ProtoTCP, tcpLen
	case ICMPEcho:
		proto, l4len = 1, icmpLen
		if b.v6 {
			proto = 58
		}
	}
	ipLen := ipv4Len
	if b.v6 {
		ipLen = ipv6Len
		binary.BigEndian.PutUint16(h[l2-2:], 0x86dd)
	} else {
		binary.BigEndian.PutUint16(h[l2-2:], 0x0800)
	}
	b.l4 = l2 + ipLen
	b.hdrLen = b.l4 + l4len
	h = append(h, make([]byte, ipLen+l4len)...)
	ip := h[l2:]
	if b.v6 {
		ip[0] = 0x60
		ip[6] = proto
		ip[7] = ttl
	} else {
		ip[0] = 0x45
		ip[6] = 0x40 // DF
		ip[8] = ttl
		ip[9] = proto
	}
	l4 := h[b.l4:]
	switch cfg.Mode {
	case TCPSyn:
		mtu := cfg.MTU
		if mtu == 0 {
			mtu = 1500
		}
		mss := mtu - ipLen - 20
		if mss < 536 || mss > 65535 {
			return nil, fmt.Errorf("%w: MTU %d: MSS %d", ErrConfig, mtu, mss)
		}
		l4[12] = tcpLen / 4 << 4
		l4[13] = 0x02 // SYN
		binary.BigEndian.PutUint16(l4[14:], uint16(65535-65535%mss))
		o := l4[20:]
		o[0], o[1] = 2, 4 // MSS
		binary.BigEndian.PutUint16(o[2:], uint16(mss))
		o[4], o[5] = 4, 2   // SACK permitted
		o[6], o[7] = 8, 10  // timestamps; TSval, TSecr follow
		o[16], o[17] = 1, 3 // NOP, window scale
		o[18], o[19] = 3, 7 // ... length 3, shift 7
		b.tsval = uint32(b.rng.Uint64())
		b.sizes = nil
		b.maxLen = b.hdrLen
	case ICMPEcho:
		l4[0] = 8
		if b.v6 {
			l4[0] = 128
		}
	}
	b.tmpl = h
	if cfg.Mode != TCPSyn {
		min := b.hdrLen
		if cfg.Mode == UDP {
			min += payload.HeaderLen
		}
		if err := b.checkSizes(min); err != nil {
			return nil, err
		}
		b.pat = payload.Pattern(b.maxLen)
	}
	for range cfg.Start {
		b.step()
	}
	return b, nil
}

func (b *Builder) checkSizes(min int) error {
	if len(b.sizes) == 0 {
		return fmt.Errorf("%w: no frame sizes", ErrConfig)
	}
	for _, n := range b.sizes {
		if n < min || n > 65535 {
			return fmt.Errorf("%w: frame size %d: the %s headers need %d bytes", ErrConfig, n, b.mode, min)
		}
		b.maxLen = max(b.maxLen, n)
	}
	return nil
}

// rangeLen is the number of addresses of p (0 for 2^64 or more).
func rangeLen(p netip.Prefix) uint64 {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 64 {
		return 0
	}
	return 1 << host
}

// hostMask is the host bits of p as a 128-bit number hi:lo.
func hostMask(p netip.Prefix) (lo, hi uint64) {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 64 {
		return ^uint64(0), ^uint64(0) >> (128 - host)
	}
	return 1<<host - 1, 0
}

// MaxLen is the length of the largest frame the Builder makes.
func (b *Builder) MaxLen() int { return b.maxLen }

// Mode is the Builder's mode.
func (b *Builder) Mode() Mode { return b.mode }

// Flows is the number of combinations of the engine's fields, saturated
// at 2^64-1 (1 for Raw).
func (b *Builder) Flows() uint64 {
	if b.mode == Raw {
		return 1
	}
	t := uint64(1)
	for _, n := range b.n {
		if n == 0 {
			return ^uint64(0)
		}
		hi, lo := bits.Mul64(t, n)
		if hi != 0 {
			return ^uint64(0)
		}
		t = lo
	}
	return t
}

// NextLen is the length of the frame the next Build makes.
func (b *Builder) NextLen() int {
	if b.mode == TCPSyn {
		return b.hdrLen
	}
	return b.sizes[b.k]
}

// next moves the field engine to its next combination.
func (b *Builder) next() {
	if b.order == Random {
		for i := range fSrc { // the ports
			b.idx[i], _ = bits.Mul64(b.rng.Uint64(), b.n[i]) // uniform in [0, n)
		}
		for i := fSrc; i <= fDst; i++ { // the addresses: random host bits
			b.idx[i] = b.rng.Uint64() & b.mask[i]
			if b.maskHi[i] != 0 {
				b.idxHi[i] = b.rng.Uint64() & b.maskHi[i]
			}
		}
		return
	}
	if b.seq == 0 {
		return // the first frame has the Start-th combination
	}
	for range b.stride {
		b.step()
	}
}

// step moves the sequential walk one combination on. An IPv6 prefix
// shorter than /64 is walked over all its host bits, with a carry into
// the high 64: the walk wraps only after 2^host addresses.
func (b *Builder) step() {
	for i := range fSrc { // the ports
		b.idx[i]++
		if b.idx[i] != b.n[i] {
			return
		}
		b.idx[i] = 0
	}
	for i := fSrc; i <= fDst; i++ {
		lo, c := bits.Add64(b.idx[i], 1, 0)
		b.idx[i], b.idxHi[i] = lo&b.mask[i], (b.idxHi[i]+c)&b.maskHi[i]
		if b.idx[i]|b.idxHi[i] != 0 {
			return
		}
	}
}

// Build writes the next frame into buf and returns its length. buf must
// hold NextLen bytes; Build panics otherwise, like a slice index out of
// range.
func (b *Builder) Build(buf []byte) int {
	size := b.NextLen()
	buf = buf[:size]
	if b.mode == Raw {
		copy(buf, b.tmpl[:size])
		b.advance()
		return size
	}
	b.next()
	copy(buf, b.tmpl)
	ip := buf[b.l3:b.l4]
	seg := buf[b.l4:]
	var pseudo uint32
	sport := b.sport + uint16(b.idx[fSport])
	dport := b.dport + uint16(b.idx[fDport])
	if b.v6 {
		putAddr6(ip[8:24], &b.src, b.idxHi[fSrc], b.idx[fSrc])
		putAddr6(ip[24:40], &b.dst, b.idxHi[fDst], b.idx[fDst])
		binary.BigEndian.PutUint16(ip[4:], uint16(len(seg)))
		pseudo = csum.PseudoHeaderIPv6([16]byte(ip[8:24]), [16]byte(ip[24:40]), ip[6], uint32(len(seg)))
	} else {
		binary.BigEndian.PutUint32(ip[12:], binary.BigEndian.Uint32(b.src[:])+uint32(b.idx[fSrc]))
		binary.BigEndian.PutUint32(ip[16:], binary.BigEndian.Uint32(b.dst[:])+uint32(b.idx[fDst]))
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(seg)))
		binary.BigEndian.PutUint16(ip[10:], csum.IPv4Header(ip))
		if b.mode != ICMPEcho {
			pseudo = csum.PseudoHeaderIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), ip[9], uint16(len(seg)))
		}
	}
	switch b.mode {
	case UDP:
		binary.BigEndian.PutUint16(seg[0:], sport)
		binary.BigEndian.PutUint16(seg[2:], dport)
		binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
		p := seg[udpLen:]
		payload.Put(p, b.flow, len(p), b.seq)
		s := csum.Sum(seg[:udpLen+payload.HeaderLen], pseudo)
		s = csum.CopyAndSum(p[payload.HeaderLen:], payload.Body(b.pat, b.seq, len(p)), s)
		binary.BigEndian.PutUint16(seg[6:], csum.FinishUDP(s))
	case TCPSyn:
		binary.BigEndian.PutUint16(seg[0:], sport)
		binary.BigEndian.PutUint16(seg[2:], dport)
		binary.BigEndian.PutUint32(seg[4:], uint32(b.rng.Uint64()))
		binary.BigEndian.PutUint32(seg[28:], b.tsval+uint32(b.seq))
		binary.BigEndian.PutUint16(seg[16:], csum.Finish(csum.Sum(seg, pseudo)))
	case ICMPEcho:
		binary.BigEndian.PutUint16(seg[4:], sport) // identifier
		binary.BigEndian.PutUint16(seg[6:], uint16(b.seq))
		s := csum.Sum(seg[:icmpLen], pseudo) // ICMPv6: with the pseudo-header; ICMP: without
		s = csum.CopyAndSum(seg[icmpLen:], b.pat[:len(seg)-icmpLen], s)
		binary.BigEndian.PutUint16(seg[2:], csum.Finish(s))
	}
	b.advance()
	return size
}

func (b *Builder) advance() {
	b.seq++
	if b.sizes != nil {
		if b.k++; b.k == len(b.sizes) {
			b.k = 0
		}
	}
}

// putAddr6 writes base plus the 128-bit offset hi:lo into a.
func putAddr6(a []byte, base *[16]byte, hi, lo uint64) {
	lo, c := bits.Add64(binary.BigEndian.Uint64(base[8:]), lo, 0)
	binary.BigEndian.PutUint64(a[:8], binary.BigEndian.Uint64(base[:8])+hi+c)
	binary.BigEndian.PutUint64(a[8:], lo)
}
