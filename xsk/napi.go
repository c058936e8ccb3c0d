package xsk

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xdpkit/xdpkit/internal/netdev"
)

// NAPIDeferral is the kernel's interrupt deferral on a device's NAPI
// instances. After a poll that found packets the kernel leaves the
// device's interrupt off for up to DeferHardIRQs polls that find none,
// and a timer of GROFlushTimeout polls the NAPI instead; so the packets
// reach the RX ring in batches, and a receiver that sleeps on its socket
// wakes once per batch instead of once per interrupt, at up to
// GROFlushTimeout of added latency. On veth the "interrupt" is the
// sending CPU's napi_schedule. make bench's "NAPI deferral" rows use
// DeferHardIRQs 2 and GROFlushTimeout 200µs; both 0 turn deferral off.
type NAPIDeferral struct {
	DeferHardIRQs   uint32        // napi_defer_hard_irqs
	GROFlushTimeout time.Duration // gro_flush_timeout
	// IRQSuspendTimeout (Linux 6.14 and later, netdev napi-set only)
	// keeps the interrupt off for up to this long after an epoll wait
	// that busy polls with prefer_busy_poll (EPIOCSPARAMS) found events.
	// Nothing in xsk polls so (the Go runtime's poller does not busy
	// poll): it is for other users of the device. 0 leaves it as it is.
	IRQSuspendTimeout time.Duration
}

// NAPIChange is what SetNAPIDeferral changed. Restore puts it back.
type NAPIChange struct {
	ifname     string
	sysfs      bool          // made through sysfs, not napi-set
	napis      []netdev.NAPI // napi-set: the instances and their old settings
	irqSuspend bool          // napi-set: irq-suspend-timeout was changed too
	old        sysfsNAPI     // sysfs: the device's old values
	done       bool
}

// sysfsNAPI is a device's per-device NAPI settings in sysfs.
type sysfsNAPI struct {
	deferIRQs uint32
	flush     time.Duration
}

// napiGet and napiSet are netdev.NAPIs and netdev.SetNAPI, replaced in
// tests to act as an older kernel's.
var (
	napiGet = netdev.NAPIs
	napiSet = netdev.SetNAPI
)

// Via says how the change was made: "netdev napi-set" with the number of
// NAPI instances, or "sysfs" (the device's napi_defer_hard_irqs and
// gro_flush_timeout, which also apply to NAPI instances made later).
func (c *NAPIChange) Via() string {
	if c.sysfs {
		return "sysfs (napi_defer_hard_irqs, gro_flush_timeout of the device)"
	}
	return fmt.Sprintf("netdev napi-set (%d NAPI instances)", len(c.napis))
}

// ErrNAPISysfs is returned by SetNAPIDeferral when it would have to use
// sysfs, and the sysfs mounted at /sys/class/net shows another network
// namespace than the calling thread's (a thread that entered a namespace
// with setns; ip netns exec mounts a matching one).
var ErrNAPISysfs = errors.New("xsk: /sys/class/net shows another network namespace than the calling thread's")

// SetNAPIDeferral sets the interrupt deferral of every NAPI instance of
// the device ifname, in the calling thread's network namespace, and
// returns the change, whose Restore puts the old settings back (from the
// same namespace). It needs CAP_NET_ADMIN.
//
// It uses the netdev family's napi-set (Linux 6.13) on each NAPI instance
// the device has. Where the kernel lacks napi-set or the netdev family
// (Ubuntu 22.04 and 24.04, RHEL 9), or the device has no NAPI instance
// yet (veth polls NAPIs only with an XDP program attached or GRO on), it
// writes the device's sysfs files instead (napi_defer_hard_irqs, Linux
// 5.11; gro_flush_timeout), which apply to the device's NAPI instances
// now and later. Only napi-set has IRQSuspendTimeout: asked for without
// it, SetNAPIDeferral returns an error that matches
// errors.ErrUnsupported and changes nothing.
//
// Restore before the NAPI instances go (on veth: before detaching the XDP
// program, unless GRO is on): napi-set cannot reach them after, and a
// driver that keeps per-queue NAPI settings (Linux 6.13) would give ours
// to the next instances. veth does not keep them.
func SetNAPIDeferral(ifname string, d NAPIDeferral) (*NAPIChange, error) {
	if d.GROFlushTimeout < 0 || d.IRQSuspendTimeout < 0 || d.DeferHardIRQs > math.MaxInt32 {
		return nil, fmt.Errorf("xsk: NAPI deferral on %s: %+v out of range", ifname, d)
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrNoDevice, ifname, err)
	}
	fail := func(err error) (*NAPIChange, error) {
		return nil, fmt.Errorf("xsk: NAPI deferral on %s: %w", ifname, err)
	}
	c := &NAPIChange{ifname: ifname}
	napis, err := napiGet(ifi.Index)
	switch {
	case err != nil && !errors.Is(err, errors.ErrUnsupported):
		return fail(err)
	case err == nil && len(napis) > 0:
		err := c.set(napis, d)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errors.ErrUnsupported) || d.IRQSuspendTimeout > 0 {
			return fail(err)
		}
		// Linux 6.8 to 6.12: napi-get without napi-set.
	case err == nil && d.IRQSuspendTimeout > 0:
		return fail(errors.New("no NAPI instance to set irq-suspend-timeout on yet (veth: attach the XDP program first)"))
	}
	if d.IRQSuspendTimeout > 0 {
		return fail(fmt.Errorf("irq-suspend-timeout needs napi-set (Linux 6.14): %w", errors.ErrUnsupported))
	}
	if err := c.sysfsSet(d); err != nil {
		if errors.Is(err, ErrNAPISysfs) {
			return nil, fmt.Errorf("%w (NAPI deferral on %s needs sysfs: no napi-set here, or no NAPI instance yet)", err, ifname)
		}
		return fail(err)
	}
	return c, nil
}

// set sets d on each of napis through napi-set; on an error it puts back
// the ones it changed, and c stays unchanged.
func (c *NAPIChange) set(napis []netdev.NAPI, d NAPIDeferral) error {
	s := netdev.NAPISettings{DeferHardIRQs: &d.DeferHardIRQs, GROFlushTimeout: &d.GROFlushTimeout}
	irqSuspend := d.IRQSuspendTimeout > 0
	if irqSuspend {
		s.IRQSuspendTimeout = &d.IRQSuspendTimeout
	}
	for i, n := range napis {
		if err := napiSet(n.ID, s); err != nil {
			return errors.Join(err, napiRestore(napis[:i], irqSuspend))
		}
	}
	c.napis, c.irqSuspend = napis, irqSuspend
	return nil
}

// napiRestore puts back the settings of napis (irq-suspend-timeout too if
// irqSuspend).
func napiRestore(napis []netdev.NAPI, irqSuspend bool) error {
	var errs []error
	for _, n := range napis {
		old := netdev.NAPISettings{DeferHardIRQs: &n.DeferHardIRQs, GROFlushTimeout: &n.GROFlushTimeout}
		if irqSuspend {
			old.IRQSuspendTimeout = &n.IRQSuspendTimeout
		}
		if err := napiSet(n.ID, old); err != nil {
			errs = append(errs, fmt.Errorf("NAPI %d: %w", n.ID, err))
		}
	}
	return errors.Join(errs...)
}

// sysfsDir is where the per-device files are.
const sysfsDir = "/sys/class/net"

func (c *NAPIChange) sysfsSet(d NAPIDeferral) error {
	if err := sysfsMatches(); err != nil {
		return err
	}
	old, err := sysfsRead(c.ifname)
	if err != nil {
		return err
	}
	if err := sysfsWrite(c.ifname, sysfsNAPI{d.DeferHardIRQs, d.GROFlushTimeout}); err != nil {
		return errors.Join(err, sysfsWrite(c.ifname, old))
	}
	c.old, c.sysfs = old, true
	return nil
}

// sysfsMatches checks that the sysfs at sysfsDir shows the calling
// thread's network namespace: the same devices, by name and index, as
// rtnetlink lists there. Two namespaces with the same device names and
// indexes would pass: it guards against the common mistake (a setns
// thread with the host's /sys), it proves nothing.
func sysfsMatches() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	want := make(map[string]int, len(ifs))
	for _, i := range ifs {
		want[i.Name] = i.Index
	}
	ents, err := os.ReadDir(sysfsDir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNAPISysfs, err)
	}
	got := make(map[string]int, len(ents))
	for _, e := range ents {
		v, err := sysfsUint(e.Name(), "ifindex")
		if err != nil {
			continue // not a device (bonding_masters), or gone meanwhile
		}
		got[e.Name()] = int(v)
	}
	if !maps.Equal(want, got) {
		return ErrNAPISysfs
	}
	return nil
}

// sysfsUint reads the number in the device's sysfs file name.
func sysfsUint(ifname, name string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(sysfsDir, ifname, name))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

func sysfsRead(ifname string) (sysfsNAPI, error) {
	d, err := sysfsUint(ifname, "napi_defer_hard_irqs")
	if errors.Is(err, os.ErrNotExist) {
		return sysfsNAPI{}, fmt.Errorf("no napi_defer_hard_irqs (Linux 5.11): %w", errors.ErrUnsupported)
	}
	if err != nil {
		return sysfsNAPI{}, err
	}
	f, err := sysfsUint(ifname, "gro_flush_timeout")
	if err != nil {
		return sysfsNAPI{}, err
	}
	return sysfsNAPI{uint32(d), time.Duration(f)}, nil
}

func sysfsWrite(ifname string, s sysfsNAPI) error {
	for _, f := range []struct {
		name string
		v    uint64
	}{
		{"napi_defer_hard_irqs", uint64(s.deferIRQs)},
		{"gro_flush_timeout", uint64(s.flush)},
	} {
		p := filepath.Join(sysfsDir, ifname, f.name)
		if err := os.WriteFile(p, []byte(strconv.FormatUint(f.v, 10)), 0); err != nil {
			if errors.Is(err, os.ErrPermission) {
				return fmt.Errorf("needs CAP_NET_ADMIN: %w", err)
			}
			return err
		}
	}
	return nil
}

// Restore puts back the settings SetNAPIDeferral changed, in the calling
// thread's network namespace (it must be the one SetNAPIDeferral ran in).
// After one that succeeded, a call does nothing; after an error it tries
// again.
func (c *NAPIChange) Restore() error {
	if c == nil || c.done {
		return nil
	}
	var err error
	if c.sysfs {
		err = c.sysfsRestore()
	} else {
		err = napiRestore(c.napis, c.irqSuspend)
	}
	if err != nil {
		return fmt.Errorf("xsk: NAPI deferral on %s: restore: %w", c.ifname, err)
	}
	c.done = true
	return nil
}

// sysfsRestore writes the old values back if sysfs still shows the
// device SetNAPIDeferral saw (by index and address; it checked every
// device then: others may have come and gone since).
func (c *NAPIChange) sysfsRestore() error {
	ifi, err := net.InterfaceByName(c.ifname)
	if err != nil {
		return err
	}
	idx, err1 := sysfsUint(c.ifname, "ifindex")
	mac, err2 := os.ReadFile(filepath.Join(sysfsDir, c.ifname, "address"))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%w: %w", ErrNAPISysfs, err)
	}
	if idx != uint64(ifi.Index) ||
		len(ifi.HardwareAddr) > 0 && strings.TrimSpace(string(mac)) != ifi.HardwareAddr.String() {
		return ErrNAPISysfs
	}
	return sysfsWrite(c.ifname, c.old)
}
