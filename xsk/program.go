package xsk

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"

	"github.com/xdpkit/xdpkit/internal/xdpprog"
)

// Filter selects the traffic that the XDP program sends to the sockets;
// everything else (ARP, neighbour discovery, ssh, ...) goes on to the
// kernel. A nil *Filter sends every packet of a queue with a socket to it.
type Filter struct {
	// The L4 protocols to redirect, over Ethernet with or without one
	// 802.1Q or 802.1ad tag. When none is set, all four are selected (so
	// that a Filter with only DstPorts or PassDst does what it says).
	IPv4UDP, IPv6UDP, IPv4TCP, IPv6TCP bool
	// DstPorts, if not empty, restricts redirection to these UDP/TCP
	// destination ports. Port 0 is allowed.
	DstPorts []uint16
	// OnlyDst, if not empty, restricts redirection to packets addressed
	// to one of these destination addresses; packets of an IP version
	// with none listed go to the kernel. IPv4-mapped IPv6 addresses are
	// treated as IPv4, zones are ignored. At most MaxPassDst entries.
	OnlyDst []netip.Addr
	// PassDst lists destination addresses whose packets always go to the
	// kernel (the host's own addresses). IPv4-mapped IPv6 addresses are
	// treated as IPv4. At most MaxPassDst entries.
	PassDst []netip.Addr
}

// MaxPassDst is the most addresses Filter.PassDst may hold.
const MaxPassDst = xdpprog.MaxPassDst

// AttachMode is the XDP hook the program is attached to.
type AttachMode int

// Attach modes.
const (
	AttachAuto    AttachMode = iota // native, falling back to generic
	AttachNative                    // the driver's hook (XDP_FLAGS_DRV_MODE)
	AttachGeneric                   // the skb hook (XDP_FLAGS_SKB_MODE)
)

// String names the mode.
func (m AttachMode) String() string { return xdpprog.Mode(m).String() }

// ProgramConfig configures AttachProgram. A nil *ProgramConfig means: no
// filter, native attach with generic fallback, 64 queues.
type ProgramConfig struct {
	Filter *Filter
	Mode   AttachMode
	// Frags loads the program with BPF_F_XDP_HAS_FRAGS; it is chosen
	// automatically when the interface's MTU needs it.
	Frags bool
	// MaxQueues is the number of queues that can take a socket (64).
	MaxQueues int
	// Metadata makes the program write RX metadata in front of each frame
	// it redirects, which rxpath.Config.Metadata reads; see
	// Program.Metadata (metadata.go) for what the kernel and device gave.
	Metadata bool
}

// Program is the XDP program that redirects packets into AF_XDP sockets
// by receive queue (an XSKMAP indexed by rx_queue_index); a queue without
// a socket passes its packets to the kernel. It is attached as a bpf_link
// where the kernel has XDP links (5.9), so it goes away on Close and when
// the process dies; otherwise through rtnetlink, and then it stays
// attached if the process dies without Close (BPFLink says which).
type Program struct {
	p       *xdpprog.Program
	ifname  string
	ifindex int
	mode    AttachMode
}

var _ io.Closer = (*Program)(nil)

// AttachProgram loads the program and attaches it to the interface named
// ifname.
func AttachProgram(ifname string, cfg *ProgramConfig) (*Program, error) {
	var c ProgramConfig
	if cfg != nil {
		c = *cfg
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrNoDevice, ifname, err)
	}
	p, err := xdpprog.Load(&xdpprog.Config{Filter: (*xdpprog.Filter)(c.Filter), Frags: c.Frags, MaxQueues: c.MaxQueues,
		Metadata: c.Metadata, Ifindex: ifi.Index})
	if err != nil {
		return nil, attachError(err)
	}
	mode, err := p.Attach(ifi.Index, xdpprog.Mode(c.Mode))
	if err != nil {
		p.Close()
		return nil, attachError(err)
	}
	return &Program{p: p, ifname: ifname, ifindex: ifi.Index, mode: AttachMode(mode)}, nil
}

// Register sends the traffic of s's queue to s. s must be bound to the
// interface the program is attached to.
func (p *Program) Register(s *Socket) error {
	if s.ifindex != p.ifindex {
		return fmt.Errorf("xsk: socket on %s registered with the program of %s", s.ifname, p.ifname)
	}
	if !s.g.enter() { // the fd stays open while we hold the guard
		return os.ErrClosed
	}
	defer s.g.exit()
	return p.p.Register(s.queue, s.fd)
}

// Unregister sends s's queue back to the kernel.
func (p *Program) Unregister(s *Socket) error { return p.p.Unregister(s.queue) }

// Mode is the hook the program got.
func (p *Program) Mode() AttachMode { return p.mode }

// Frags reports whether the program was loaded for multi-buffer packets.
func (p *Program) Frags() bool { return p.p.Frags() }

// Close detaches the program and releases its maps. It is idempotent.
func (p *Program) Close() error { return p.p.Close() }
