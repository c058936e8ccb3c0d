package xdpprog

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Mode is the XDP hook a program is attached to.
type Mode int

const (
	// ModeAuto tries the driver (native) hook first and falls back to the
	// generic (skb) hook when the driver cannot take the program.
	ModeAuto Mode = iota
	// ModeNative attaches in the driver's receive path (XDP_FLAGS_DRV_MODE).
	ModeNative
	// ModeGeneric attaches to the generic, skb-based hook (XDP_FLAGS_SKB_MODE).
	ModeGeneric
)

// String names the value, for messages.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// DefaultMaxQueues is the size of the XSKMAP when Config.MaxQueues is 0.
const DefaultMaxQueues = 64

// Limits on a Filter, so that the generated program stays small.
const (
	// MaxPassDst is the largest number of addresses in Filter.PassDst.
	MaxPassDst = 256
	// maxMaxQueues bounds Config.MaxQueues (the kernel caps queues per
	// device at 4096 as well).
	maxMaxQueues = 4096
)

// Filter selects the packets that go to the AF_XDP sockets. A nil *Filter
// means: every packet on a queue with a registered socket goes to that socket.
type Filter struct {
	// L4 protocols to redirect, over Ethernet with or without one 802.1Q or
	// 802.1ad tag. When none is set, all four are selected (so that a Filter
	// with only DstPorts or PassDst does what it says).
	IPv4UDP, IPv6UDP, IPv4TCP, IPv6TCP bool
	// DstPorts, if non-empty, restricts redirection to these UDP/TCP
	// destination ports. Port 0 is allowed.
	DstPorts []uint16
	// OnlyDst, if non-empty, restricts redirection to packets addressed
	// to one of these destination addresses; packets of an IP version
	// with none listed go to the kernel. IPv4-mapped IPv6 addresses are
	// treated as IPv4, zones are ignored. At most MaxPassDst entries.
	OnlyDst []netip.Addr
	// PassDst lists destination addresses whose packets always go to the
	// kernel (the host's own addresses). IPv4-mapped IPv6 addresses are
	// treated as IPv4. At most MaxPassDst entries.
	PassDst []netip.Addr
}

// Config configures Load. A nil *Config means defaults.
type Config struct {
	// Filter selects the traffic to redirect; nil redirects everything.
	Filter *Filter
	// Frags loads the program with BPF_F_XDP_HAS_FRAGS (multi-buffer).
	// Attach chooses it automatically when a native attach needs it.
	Frags bool
	// MaxQueues is the size of the XSKMAP, the highest queue index plus
	// one that can take a socket (default DefaultMaxQueues).
	MaxQueues int
	// Metadata makes the program write RX metadata in front of each
	// redirected frame (meta.go); Ifindex is the device to bind it to,
	// for the driver's RX timestamp and hash. See Program.Metadata for
	// what the kernel and device allowed.
	Metadata bool
	Ifindex  int
}

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalidConfig reports a Config or Filter that cannot be used.
	ErrInvalidConfig = errors.New("xdpprog: invalid config")
	// ErrNoInterface reports an interface index that does not exist in the
	// calling thread's network namespace.
	ErrNoInterface = errors.New("xdpprog: no such network interface")
	// ErrBusy reports an interface that already has another XDP program.
	ErrBusy = errors.New("xdpprog: interface already has an XDP program")
	// ErrAttached reports a second Attach of the same Program.
	ErrAttached = errors.New("xdpprog: program already attached")
	// ErrQueueRange reports a queue index outside the XSKMAP.
	ErrQueueRange = errors.New("xdpprog: queue index out of range")
	// ErrNotXSK reports a file descriptor that is not an AF_XDP socket.
	ErrNotXSK = errors.New("xdpprog: not an AF_XDP socket")
	// ErrPermission reports a missing capability; see CapabilityError.
	ErrPermission = errors.New("xdpprog: permission denied")
)

// CapabilityError is returned when the kernel refuses an operation with
// EPERM. It names the capabilities the operation needs. errors.Is matches it
// against ErrPermission, os.ErrPermission and unix.EPERM.
type CapabilityError struct {
	Op   string   // "load program", "create XSKMAP", "attach", ...
	Caps []string // e.g. CAP_BPF, CAP_NET_ADMIN
	Err  error    // the underlying error (wraps EPERM)
}

// Error describes the failure.
func (e *CapabilityError) Error() string {
	return fmt.Sprintf("xdpprog: %s: %v (needs %s)", e.Op, e.Err, strings.Join(e.Caps, " and "))
}

// Unwrap returns the underlying error, for errors.Is.
func (e *CapabilityError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrPermission) true.
func (e *CapabilityError) Is(target error) bool { return target == ErrPermission }

// wrap turns a syscall-level failure of op into the package's error shapes.
func wrap(op string, caps []string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return &CapabilityError{Op: op, Caps: caps, Err: err}
	}
	return fmt.Errorf("xdpprog: %s: %w", op, err)
}

var (
	capsLoad   = []string{"CAP_BPF", "CAP_NET_ADMIN"}
	capsAttach = []string{"CAP_NET_ADMIN"}
)

// Program is the loaded XDP program with its XSKMAP and, once attached, its
// bpf_link. Its methods are safe for concurrent use.
type Program struct {
	mu     sync.Mutex
	cfg    Config    // validated copy; Filter is normalised
	filter *filter   // nil: redirect everything
	xsks   *ebpf.Map // XSKMAP, queue index -> AF_XDP socket
	ports  *ebpf.Map // port bitmap (8192 bytes), nil without DstPorts
	prog   *ebpf.Program
	frags  bool      // prog was loaded with BPF_F_XDP_HAS_FRAGS
	meta   *metaPlan // RX metadata variant, nil without Config.Metadata
	link   io.Closer // a link.Link, or a netlinkXDP without XDP bpf_links
	mode   Mode      // mode of link, valid while link != nil
	closed bool
}

var _ io.Closer = (*Program)(nil)

// Load validates cfg, creates the maps and loads the program. Nothing is
// attached until Attach.
func Load(cfg *Config) (*Program, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxQueues == 0 {
		c.MaxQueues = DefaultMaxQueues
	}
	if c.MaxQueues < 0 || c.MaxQueues > maxMaxQueues {
		return nil, fmt.Errorf("%w: MaxQueues %d not in [1, %d]", ErrInvalidConfig, c.MaxQueues, maxMaxQueues)
	}
	f, err := newFilter(c.Filter)
	if err != nil {
		return nil, err
	}
	if c.Filter != nil {
		cp := *c.Filter
		cp.DstPorts = slices.Clone(cp.DstPorts)
		cp.PassDst = slices.Clone(cp.PassDst)
		cp.OnlyDst = slices.Clone(cp.OnlyDst)
		c.Filter = &cp
	}

	p := &Program{cfg: c, filter: f}
	p.xsks, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "xdpkit_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(c.MaxQueues),
	})
	if err != nil {
		return nil, wrap("create XSKMAP", capsLoad, err)
	}
	if f != nil && len(f.ports) > 0 {
		if err := p.loadPorts(); err != nil {
			p.closeAll()
			return nil, err
		}
	}
	if c.Metadata {
		p.prog, err = p.loadMetaFirst(c.Frags)
	} else {
		p.prog, err = p.load(c.Frags)
	}
	if err != nil {
		p.closeAll()
		return nil, err
	}
	p.frags = c.Frags
	return p, nil
}

func (p *Program) loadPorts() error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "xdpkit_ports",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  portBitmapSize,
		MaxEntries: 1,
		Flags:      unix.BPF_F_RDONLY_PROG,
	})
	if err != nil {
		return wrap("create port map", capsLoad, err)
	}
	p.ports = m
	bitmap := make([]byte, portBitmapSize)
	for _, port := range p.filter.ports {
		bitmap[port>>3] |= 1 << (port & 7)
	}
	if err := m.Update(uint32(0), bitmap, ebpf.UpdateAny); err != nil {
		return wrap("fill port map", capsLoad, err)
	}
	// The program only reads the bitmap; freezing it keeps it that way.
	if err := m.Freeze(); err != nil {
		return wrap("freeze port map", capsLoad, err)
	}
	return nil
}

// load assembles and loads the program, with or without
// BPF_F_XDP_HAS_FRAGS, against p's maps.
func (p *Program) load(frags bool) (*ebpf.Program, error) {
	insns := instructions(p.filter, p.meta)
	if err := insns.AssociateMap(symXSKs, p.xsks); err != nil {
		return nil, fmt.Errorf("xdpprog: %w", err)
	}
	if p.ports != nil {
		if err := insns.AssociateMap(symPorts, p.ports); err != nil {
			return nil, fmt.Errorf("xdpprog: %w", err)
		}
	}
	spec := &ebpf.ProgramSpec{
		Name:         "xdpkit_xsk",
		Type:         ebpf.XDP,
		AttachType:   ebpf.AttachXDP,
		Instructions: insns,
		License:      "Dual MIT/GPL",
	}
	if frags {
		spec.Flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	p.meta.apply(spec)
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		op := "load program"
		if frags {
			op = "load program with BPF_F_XDP_HAS_FRAGS"
		}
		return nil, wrap(op, capsLoad, err)
	}
	return prog, nil
}

// Frags reports whether the program is (now) loaded with
// BPF_F_XDP_HAS_FRAGS, either because Config.Frags asked for it or because
// Attach needed it for the interface's MTU.
func (p *Program) Frags() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frags
}

// Mode returns the mode of the current attachment and whether there is one.
func (p *Program) Mode() (Mode, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.link != nil
}

// Attach links the program to the XDP hook of the interface ifindex (in
// the calling thread's network namespace) as a bpf_link, and returns the
// mode it got. ModeAuto tries native first and falls back to generic. A
// native attach that fails with ERANGE (MTU larger than a page) is retried
// with the program reloaded with BPF_F_XDP_HAS_FRAGS. A Program can be
// attached to one interface at a time; Close detaches it.
func (p *Program) Attach(ifindex int, mode Mode) (Mode, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, fmt.Errorf("xdpprog: attach: %w", os.ErrClosed)
	}
	if p.link != nil {
		return 0, ErrAttached
	}
	if ifindex < 1 {
		return 0, fmt.Errorf("%w: interface index %d", ErrNoInterface, ifindex)
	}
	// BPF_LINK_CREATE says EINVAL for an unknown ifindex; ask rtnetlink
	// first so that the caller learns what is wrong.
	if _, err := netlink.LinkByIndex(ifindex); err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return 0, fmt.Errorf("%w: interface index %d (in the calling thread's network namespace)", ErrNoInterface, ifindex)
		}
		return 0, fmt.Errorf("xdpprog: look up interface index %d: %w", ifindex, err)
	}
	switch mode {
	case ModeNative:
		err := p.attachNative(ifindex)
		if err != nil {
			return 0, err
		}
		return ModeNative, nil
	case ModeGeneric:
		if err := p.attach(ifindex, ModeGeneric); err != nil {
			return 0, err
		}
		return ModeGeneric, nil
	case ModeAuto:
		nerr := p.attachNative(ifindex)
		if nerr == nil {
			return ModeNative, nil
		}
		if !fallbackOK(nerr) {
			return 0, nerr
		}
		if gerr := p.attach(ifindex, ModeGeneric); gerr != nil {
			return 0, fmt.Errorf("%w (native attach failed before: %w)", gerr, nerr)
		}
		return ModeGeneric, nil
	}
	return 0, fmt.Errorf("%w: mode %v", ErrInvalidConfig, mode)
}

// fallbackOK reports whether a failed native attach may be retried in
// generic mode: not for errors generic mode would hit just the same.
func fallbackOK(err error) bool {
	return !errors.Is(err, ErrPermission) && !errors.Is(err, ErrNoInterface) && !errors.Is(err, ErrBusy)
}

func (p *Program) attachNative(ifindex int) error {
	err := p.attach(ifindex, ModeNative)
	if err == nil || p.frags || !errors.Is(err, unix.ERANGE) {
		return err
	}
	// The MTU does not fit one page: the driver wants a multi-buffer
	// program. Load one against the same maps and retry.
	fp, lerr := p.load(true)
	if lerr != nil {
		return fmt.Errorf("%w (and loading a multi-buffer program for it failed: %w)", err, lerr)
	}
	old := p.prog
	p.prog, p.frags = fp, true
	if err := p.attach(ifindex, ModeNative); err != nil {
		// Keep the frags program: the interface's MTU needs it, and a
		// generic fallback works with it as well.
		old.Close()
		return err
	}
	old.Close()
	return nil
}

func (p *Program) attach(ifindex int, mode Mode) error {
	if mode == ModeGeneric {
		if err := p.unbindForGeneric(); err != nil {
			return err
		}
	}
	flags := link.XDPDriverMode
	if mode == ModeGeneric {
		flags = link.XDPGenericMode
	}
	var l io.Closer
	l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: flags})
	if err != nil && noXDPLink(err) {
		// A kernel without XDP bpf_links (before 5.9): attach through
		// rtnetlink, as ip link set xdp does.
		nl, nerr := attachNetlink(p.prog.FD(), ifindex, mode)
		if nerr == nil {
			p.link, p.mode = nl, mode
			return nil
		}
		err = fmt.Errorf("%w (bpf_link: %w)", nerr, err)
	}
	if err != nil {
		op := fmt.Sprintf("attach %s to ifindex %d", mode, ifindex)
		switch {
		case errors.Is(err, unix.ENODEV):
			return fmt.Errorf("%w: %s: %w", ErrNoInterface, op, err)
		case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST):
			return fmt.Errorf("%w: %s: %w", ErrBusy, op, err)
		case errors.Is(err, unix.ERANGE):
			return fmt.Errorf("xdpprog: %s: MTU too large for a single-buffer XDP program: %w", op, err)
		}
		return wrap(op, capsAttach, err)
	}
	p.link, p.mode = l, mode
	return nil
}

// Register puts the AF_XDP socket xskFD into the XSKMAP at queue, so that
// packets received on that queue (and accepted by the filter) go to it. It
// replaces a socket already registered there. The entry stays until
// Unregister, Close, or the socket's own close, which removes it from
// every XSKMAP (the kernel's xsk_release).
func (p *Program) Register(queue int, xskFD int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("xdpprog: register: %w", os.ErrClosed)
	}
	if queue < 0 || queue >= p.cfg.MaxQueues {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrQueueRange, queue, p.cfg.MaxQueues)
	}
	if xskFD < 0 {
		return fmt.Errorf("%w: fd %d", ErrNotXSK, xskFD)
	}
	if err := p.xsks.Update(uint32(queue), uint32(xskFD), ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSOCK) || errors.Is(err, unix.EBADF) {
			return fmt.Errorf("%w: register fd %d for queue %d: %w", ErrNotXSK, xskFD, queue, err)
		}
		return wrap(fmt.Sprintf("register queue %d", queue), capsLoad, err)
	}
	return nil
}

// Unregister removes the socket of queue from the XSKMAP; packets on that
// queue go to the kernel again. Unregistering an empty queue is not an
// error.
func (p *Program) Unregister(queue int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("xdpprog: unregister: %w", os.ErrClosed)
	}
	if queue < 0 || queue >= p.cfg.MaxQueues {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrQueueRange, queue, p.cfg.MaxQueues)
	}
	if err := p.xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return wrap(fmt.Sprintf("unregister queue %d", queue), capsLoad, err)
	}
	return nil
}

// Close detaches the program (closes the link) and closes the program and
// its maps. It is idempotent; later calls return nil.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.closeAll()
}

func (p *Program) closeAll() error {
	var errs []error
	if p.link != nil {
		if err := p.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("xdpprog: detach: %w", err))
		}
		p.link = nil
	}
	if p.prog != nil {
		if err := p.prog.Close(); err != nil {
			errs = append(errs, fmt.Errorf("xdpprog: close program: %w", err))
		}
		p.prog = nil
	}
	for _, m := range []**ebpf.Map{&p.xsks, &p.ports} {
		if *m != nil {
			if err := (*m).Close(); err != nil {
				errs = append(errs, fmt.Errorf("xdpprog: close map: %w", err))
			}
			*m = nil
		}
	}
	return errors.Join(errs...)
}
