package netdev

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ErrNoNAPI is returned for a NAPI id the kernel does not know (in the
// calling thread's namespace). It also wraps the kernel's ENOENT.
var ErrNoNAPI = errors.New("netdev: no such NAPI instance")

// UnsupportedError names a netdev-family call or attribute that the
// running kernel lacks and the kernel that brought it. It matches
// errors.ErrUnsupported, and wraps the kernel's answer when there was one.
type UnsupportedError struct {
	Feature string // "napi-set", "napi-set irq-suspend-timeout", ...
	Kernel  string // the Linux version that brought it, "6.13"
	Err     error  // the kernel's answer (EOPNOTSUPP), nil when probed
}

// Error describes the failure.
func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("netdev: %s needs Linux %s", e.Feature, e.Kernel)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error, for errors.Is.
func (e *UnsupportedError) Unwrap() []error {
	if e.Err == nil {
		return []error{errors.ErrUnsupported}
	}
	return []error{errors.ErrUnsupported, e.Err}
}

// NAPI is one NAPI instance as the netdev family's napi-get reports it.
type NAPI struct {
	ID      uint32
	Ifindex int
	IRQ     int // the interrupt vector, -1 when the NAPI has none (veth)
	PID     int // the NAPI thread in threaded mode, 0 in softirq mode

	// The per-NAPI settings that SetNAPI changes (napi-get reports them
	// from Linux 6.13; 0 before). DeferHardIRQs is the number of empty
	// polls before hardware interrupts are re-enabled; GROFlushTimeout
	// arms the NAPI watchdog timer; IRQSuspendTimeout (Linux 6.14) keeps
	// interrupts suspended while a busy-polling application finds events.
	DeferHardIRQs        uint32
	GROFlushTimeout      time.Duration
	IRQSuspendTimeout    time.Duration
	HasIRQSuspendTimeout bool // the kernel reported irq-suspend-timeout
}

// NAPISettings are the fields SetNAPI changes; nil leaves one as it is.
type NAPISettings struct {
	DeferHardIRQs                      *uint32
	GROFlushTimeout, IRQSuspendTimeout *time.Duration
}

// NAPIs lists the NAPI instances of the device ifindex (a napi-get dump
// filtered by ifindex, Linux 6.8+) in the calling thread's namespace. A
// device that polls no NAPI (veth without an XDP program or GRO) has none.
func NAPIs(ifindex int) ([]NAPI, error) {
	c, err := dialNetdev()
	if err != nil {
		return nil, unsupported(err, "napi-get", "6.8")
	}
	defer c.Close()
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAttrNAPIIfindex, uint32(ifindex))
	msgs, err := c.dump(netdevCmdNAPIGet, ae)
	if err != nil {
		return nil, netdevError("napi-get", "6.8", ifindex, err)
	}
	napis := make([]NAPI, 0, len(msgs))
	for _, m := range msgs {
		n, err := parseNAPI(m.Data)
		if err != nil {
			return nil, err
		}
		if n.Ifindex == ifindex {
			napis = append(napis, n)
		}
	}
	return napis, nil
}

// SetNAPI changes the settings of NAPI instance id (napi-set, Linux 6.13;
// IRQSuspendTimeout 6.14), in the calling thread's namespace. It needs
// CAP_NET_ADMIN. On an older kernel it returns an *UnsupportedError,
// which matches errors.ErrUnsupported, and changes nothing.
func SetNAPI(id uint32, s NAPISettings) error {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAttrNAPIID, id)
	if s.DeferHardIRQs != nil {
		if *s.DeferHardIRQs > math.MaxInt32 {
			return fmt.Errorf("netdev: napi-set: defer-hard-irqs %d above %d", *s.DeferHardIRQs, math.MaxInt32)
		}
		ae.Uint32(netdevAttrNAPIDeferHardIRQs, *s.DeferHardIRQs)
	}
	for _, d := range []struct {
		v   *time.Duration
		typ uint16
		nm  string
	}{
		{s.GROFlushTimeout, netdevAttrNAPIGROFlushTimeout, "gro-flush-timeout"},
		{s.IRQSuspendTimeout, netdevAttrNAPIIRQSuspendTimeout, "irq-suspend-timeout"},
	} {
		if d.v == nil {
			continue
		}
		if *d.v < 0 {
			return fmt.Errorf("netdev: napi-set: negative %s %v", d.nm, *d.v)
		}
		ae.Uint64(d.typ, uint64(*d.v))
	}

	c, err := dialNetdev()
	if err != nil {
		return unsupported(err, "napi-set", "6.13")
	}
	defer c.Close()
	if s.IRQSuspendTimeout != nil {
		// Before 6.14 napi-set rejects the attribute with a bare EINVAL
		// (strict validation); napi-get tells whether the kernel has it.
		n, err := c.getNAPI(id)
		if err != nil {
			return err
		}
		if !n.HasIRQSuspendTimeout {
			return &UnsupportedError{Feature: "napi-set irq-suspend-timeout", Kernel: "6.14"}
		}
	}
	if err := c.set(netdevCmdNAPISet, ae); err != nil {
		return napiError("napi-set", "6.13", id, err)
	}
	return nil
}

// getNAPI asks for one NAPI instance (napi-get do).
func (c *conn) getNAPI(id uint32) (NAPI, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAttrNAPIID, id)
	m, err := c.get(netdevCmdNAPIGet, ae)
	if err != nil {
		return NAPI{}, napiError("napi-get", "6.8", id, err)
	}
	return parseNAPI(m.Data)
}

// parseNAPI decodes the attributes of a napi-get reply.
func parseNAPI(b []byte) (NAPI, error) {
	n := NAPI{IRQ: -1}
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return n, fmt.Errorf("netdev: napi-get reply: %w", err)
	}
	gotID := false
	for ad.Next() {
		switch ad.Type() {
		case netdevAttrNAPIID:
			v, err := u32Attr(ad, "napi id")
			if err != nil {
				return n, err
			}
			n.ID, gotID = v, true
		case netdevAttrNAPIIfindex, netdevAttrNAPIIRQ, netdevAttrNAPIPID, netdevAttrNAPIDeferHardIRQs:
			v, err := u32Attr(ad, "napi")
			if err != nil {
				return n, err
			}
			switch ad.Type() {
			case netdevAttrNAPIIfindex:
				n.Ifindex = int(v)
			case netdevAttrNAPIIRQ:
				n.IRQ = int(v)
			case netdevAttrNAPIPID:
				n.PID = int(v)
			default:
				n.DeferHardIRQs = v
			}
		case netdevAttrNAPIGROFlushTimeout, netdevAttrNAPIIRQSuspendTimeout:
			v, err := uintAttr(ad)
			if err != nil {
				return n, err
			}
			d := time.Duration(min(v, math.MaxInt64))
			if ad.Type() == netdevAttrNAPIGROFlushTimeout {
				n.GROFlushTimeout = d
			} else {
				n.IRQSuspendTimeout, n.HasIRQSuspendTimeout = d, true
			}
		}
	}
	if err := ad.Err(); err != nil {
		return n, err
	}
	if !gotID {
		return n, errors.New("netdev: napi-get reply without id")
	}
	return n, nil
}

// QueueType is the kind of a device queue; each kind has its own ids.
type QueueType uint32

// Queue types (enum netdev_queue_type).
const (
	QueueRX QueueType = 0
	QueueTX QueueType = 1
)

// String names the value, for messages.
func (t QueueType) String() string {
	switch t {
	case QueueRX:
		return "rx"
	case QueueTX:
		return "tx"
	}
	return fmt.Sprintf("queue-type(%d)", uint32(t))
}

// Queue is one configured queue of a device as queue-get reports it.
type Queue struct {
	ID      int
	Type    QueueType
	Ifindex int
	NAPIID  uint32 // the NAPI that services it, 0 when the driver does not say
}

// Queues lists the configured RX and TX queues of the device ifindex
// (queue-get dump, Linux 6.8+) in the calling thread's namespace, with
// the NAPI instance that services each where the driver links them
// (netif_queue_set_napi); an AF_XDP socket bound to a queue is polled by
// that NAPI.
func Queues(ifindex int) ([]Queue, error) {
	c, err := dialNetdev()
	if err != nil {
		return nil, unsupported(err, "queue-get", "6.8")
	}
	defer c.Close()
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAttrQueueIfindex, uint32(ifindex))
	msgs, err := c.dump(netdevCmdQueueGet, ae)
	if err != nil {
		return nil, netdevError("queue-get", "6.8", ifindex, err)
	}
	qs := make([]Queue, 0, len(msgs))
	for _, m := range msgs {
		q, err := parseQueue(m)
		if err != nil {
			return nil, err
		}
		if q.Ifindex == ifindex {
			qs = append(qs, q)
		}
	}
	return qs, nil
}

func parseQueue(m genetlink.Message) (Queue, error) {
	var q Queue
	ad, err := netlink.NewAttributeDecoder(m.Data)
	if err != nil {
		return q, fmt.Errorf("netdev: queue-get reply: %w", err)
	}
	var got int
	for ad.Next() {
		switch ad.Type() {
		case netdevAttrQueueID, netdevAttrQueueIfindex, netdevAttrQueueType, netdevAttrQueueNAPIID:
			v, err := u32Attr(ad, "queue")
			if err != nil {
				return q, err
			}
			switch ad.Type() {
			case netdevAttrQueueID:
				q.ID = int(v)
				got |= 1
			case netdevAttrQueueIfindex:
				q.Ifindex = int(v)
			case netdevAttrQueueType:
				q.Type = QueueType(v)
				got |= 2
			default:
				q.NAPIID = v
			}
		}
	}
	if err := ad.Err(); err != nil {
		return q, err
	}
	if got != 3 {
		return q, errors.New("netdev: queue-get reply without id or type")
	}
	return q, nil
}

// unsupported turns a missing netdev family into an *UnsupportedError.
func unsupported(err error, feature, kernel string) error {
	if errors.Is(err, errFamilyMissing) {
		return &UnsupportedError{Feature: feature, Kernel: kernel, Err: err}
	}
	return err
}

// netdevError maps the kernel's answer to a per-device call.
func netdevError(op, kernel string, ifindex int, err error) error {
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return &UnsupportedError{Feature: op, Kernel: kernel, Err: err}
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("%w: netdev %s ifindex %d: %w", ErrNoDevice, op, ifindex, err)
	}
	return fmt.Errorf("netdev %s ifindex %d: %w", op, ifindex, err)
}

// napiError maps the kernel's answer to a per-NAPI call.
func napiError(op, kernel string, id uint32, err error) error {
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return &UnsupportedError{Feature: op, Kernel: kernel, Err: err}
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: netdev %s id %d: %w", ErrNoNAPI, op, id, err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("netdev %s id %d needs CAP_NET_ADMIN: %w", op, id, err)
	}
	return fmt.Errorf("netdev %s id %d: %w", op, id, err)
}
