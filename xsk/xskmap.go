package xsk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Errors returned by UseMap, LoadPinnedMap and Map's methods.
var (
	// ErrMapType: the map is not a BPF_MAP_TYPE_XSKMAP with 4-byte keys
	// and values.
	ErrMapType = errors.New("xsk: map is not an XSKMAP")
	// ErrMapRange: the socket's queue index, or the key, is not below
	// the map's max_entries, so the program could never redirect to it.
	ErrMapRange = errors.New("xsk: index beyond the XSKMAP's max_entries")
)

// Map is an XSKMAP (BPF_MAP_TYPE_XSKMAP) of the caller's own XDP program:
// the equivalent of libxdp's xsk_socket__update_xskmap and of DPDK's
// use_pinned_map. The program redirects with
// bpf_redirect_map(&map, ctx->rx_queue_index, XDP_PASS); Register puts a
// socket at its queue index. xdpkit neither loads nor attaches that
// program: attaching it, and deciding what to do about a program already
// on the interface, is the caller's (AttachProgram is not involved).
type Map struct {
	mu     sync.Mutex
	m      *ebpf.Map
	max    uint32
	owned  bool // opened by LoadPinnedMap: Close closes it
	closed bool
}

var _ io.Closer = (*Map)(nil)

// UseMap checks that m is an XSKMAP with 4-byte keys and values and
// returns a Map over it. The caller keeps m: Map.Close does not close it.
func UseMap(m *ebpf.Map) (*Map, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil map", ErrMapType)
	}
	if err := checkMap(m); err != nil {
		return nil, err
	}
	return &Map{m: m, max: m.MaxEntries()}, nil
}

// LoadPinnedMap opens the XSKMAP pinned at path (in a bpffs, usually
// under /sys/fs/bpf) and checks it as UseMap does. Close closes it.
func LoadPinnedMap(path string) (*Map, error) {
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, &CapabilityError{Op: "xsk: open pinned map " + path, Cap: "CAP_BPF", Err: permErrno(err)}
		}
		return nil, fmt.Errorf("xsk: open pinned map %s: %w", path, err)
	}
	if err := checkMap(m); err != nil {
		m.Close()
		return nil, fmt.Errorf("%w (pinned at %s)", err, path)
	}
	return &Map{m: m, max: m.MaxEntries(), owned: true}, nil
}

func permErrno(err error) error {
	if errors.Is(err, unix.EACCES) {
		return unix.EACCES
	}
	return unix.EPERM
}

func checkMap(m *ebpf.Map) error {
	if m.Type() != ebpf.XSKMap {
		return fmt.Errorf("%w: %v", ErrMapType, m.Type())
	}
	if m.KeySize() != 4 || m.ValueSize() != 4 {
		return fmt.Errorf("%w: key size %d and value size %d, want 4 and 4", ErrMapType, m.KeySize(), m.ValueSize())
	}
	return nil
}

// MaxEntries is the map's size: the highest queue index it can hold, plus
// one.
func (x *Map) MaxEntries() int { return int(x.max) }

// Register puts s at its queue index, replacing a socket already there:
// from then on the program's redirects for that queue reach s. The map
// holds its own reference to the socket until Unregister, until another
// socket takes the index, or until the map goes away; closing s removes
// it from every XSKMAP (the kernel's xsk_release), so do not Unregister
// after Close: the index may hold another socket by then. s must be bound to the interface (and queue) that the
// program runs on; the kernel drops redirects to a socket bound elsewhere.
func (x *Map) Register(s *Socket) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("xsk: register: %w", os.ErrClosed)
	}
	if err := x.inRange(s.queue); err != nil {
		return err
	}
	if !s.g.enter() { // the fd stays open while we hold the guard
		return os.ErrClosed
	}
	defer s.g.exit()
	if err := x.m.Update(uint32(s.queue), uint32(s.fd), ebpf.UpdateAny); err != nil {
		return x.updateError("register", "queue", s.queue, err)
	}
	return nil
}

// Unregister removes the socket at s's queue index, whichever socket it
// is (the kernel cannot tell which one is there); the program's redirects
// for that queue then fail and the program's fallback action applies
// (XDP_PASS in bpf_redirect_map(..., XDP_PASS)). An empty index is not an
// error. It works also after s was closed.
func (x *Map) Unregister(s *Socket) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("xsk: unregister: %w", os.ErrClosed)
	}
	if err := x.inRange(s.queue); err != nil {
		return err
	}
	if err := x.m.Delete(uint32(s.queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return x.updateError("unregister", "queue", s.queue, err)
	}
	return nil
}

func (x *Map) inRange(queue int) error {
	if queue < 0 || uint64(queue) >= uint64(x.max) {
		return fmt.Errorf("%w: queue %d, max_entries %d", ErrMapRange, queue, x.max)
	}
	return nil
}

// updateError wraps a failed map update at index n, which is a queue or
// a key (what).
func (x *Map) updateError(op, what string, n int, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return &CapabilityError{Op: fmt.Sprintf("xsk: %s %s %d in XSKMAP", op, what, n), Cap: "CAP_BPF", Err: permErrno(err)}
	}
	return fmt.Errorf("xsk: %s %s %d in XSKMAP: %w", op, what, n, err)
}

// Close closes the map if LoadPinnedMap opened it (the entries stay in the
// kernel's map as long as something else holds it: the pin or the
// program); a Map from UseMap leaves the caller's *ebpf.Map open. It is
// idempotent. Registered sockets stay registered.
func (x *Map) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	if x.owned {
		return x.m.Close()
	}
	return nil
}
