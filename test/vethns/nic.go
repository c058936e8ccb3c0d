package vethns

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NICPairsEnv names the environment variable that lists pairs of network
// interfaces of this machine wired only to each other, as
// "eth0,eth1 eth2,eth3". make kernels sets it in its QEMU guests, whose
// virtio-net NICs are joined in pairs through QEMU hubs and to nothing
// else; on a machine without it, [NICPairs] is 0.
const NICPairsEnv = "XDPKIT_NIC_PAIRS"

var nicPool struct {
	sync.Mutex
	pairs [][2]string
	busy  []bool
	once  sync.Once
}

func nicPairs() [][2]string {
	nicPool.once.Do(func() {
		for _, f := range strings.Fields(os.Getenv(NICPairsEnv)) {
			a, b, ok := strings.Cut(f, ",")
			if ok && a != "" && b != "" {
				nicPool.pairs = append(nicPool.pairs, [2]string{a, b})
			}
		}
		nicPool.busy = make([]bool, len(nicPool.pairs))
	})
	return nicPool.pairs
}

// NICPairs reports how many NIC pairs NICPairsEnv offers.
func NICPairs() int { return len(nicPairs()) }

// NewNICPair lends one of NICPairsEnv's NIC pairs to a test: it moves the
// first NIC into a and the second into b and configures them as
// [CreatePair] configures a veth pair (addresses, static neighbours, DAD
// off, up). Cleanup takes the addresses off, restores MTU 1500 and moves
// both NICs back to the process's own namespace. It fails tb when no pair
// is configured, or none frees up within a minute. cfg.Queues must be 0 or
// 1 (QEMU's hub gives each NIC one queue pair).
func NewNICPair(tb testing.TB, a, b *NS, cfg *PairConfig) *Pair {
	tb.Helper()
	p, err := createNICPair(a, b, cfg)
	return closedWith(tb, p, err)
}

func createNICPair(a, b *NS, cfg *PairConfig) (_ *Pair, err error) {
	var c PairConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Queues > 1 {
		return nil, fmt.Errorf("%w: %d queues on a NIC pair (it has one)", ErrBadConfig, c.Queues)
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if a == nil || b == nil || a == b {
		return nil, fmt.Errorf("%w: a NIC pair needs two namespaces", ErrBadConfig)
	}
	if len(nicPairs()) == 0 {
		return nil, fmt.Errorf("%w: no NIC pairs (%s is empty)", ErrBadConfig, NICPairsEnv)
	}
	idx, names, err := takeNICPair(time.Minute)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			releaseNICPair(idx)
		}
	}()
	n := nextSeq()
	a4, b4, a6, b6 := pairAddrs(pid, n)
	p := &Pair{
		A:   &Link{NS: a, Name: names[0], IPv4: a4, IPv6: a6},
		B:   &Link{NS: b, Name: names[1], IPv4: b4, IPv6: b6},
		nic: idx + 1,
	}
	home, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	defer home.Close()
	type end struct {
		self, peer *Link
		h          *netlink.Handle
		l          netlink.Link
	}
	ends := []*end{{self: p.A, peer: p.B}, {self: p.B, peer: p.A}}
	for _, e := range ends {
		l, err := home.LinkByName(e.self.Name)
		if err != nil {
			p.moveHome()
			return nil, fmt.Errorf("find NIC %s: %w", e.self.Name, err)
		}
		nsh, release, err := e.self.NS.handle()
		if err != nil {
			p.moveHome()
			return nil, err
		}
		err = home.LinkSetNsFd(l, int(nsh))
		release()
		if err != nil {
			p.moveHome()
			return nil, fmt.Errorf("move NIC %s to %s: %w", e.self.Name, e.self.NS.Name, err)
		}
		if e.h, err = e.self.NS.netlinkHandle(); err != nil {
			p.moveHome()
			return nil, err
		}
		defer e.h.Close()
		if e.l, err = e.h.LinkByName(e.self.Name); err != nil {
			p.moveHome()
			return nil, fmt.Errorf("find NIC %s in %s: %w", e.self.Name, e.self.NS.Name, err)
		}
		if e.l.Attrs().MTU != c.MTU {
			if err := e.h.LinkSetMTU(e.l, c.MTU); err != nil {
				p.moveHome()
				return nil, fmt.Errorf("set MTU %d on NIC %s: %w", c.MTU, e.self.Name, err)
			}
		}
		e.self.Index, e.self.MAC = e.l.Attrs().Index, e.l.Attrs().HardwareAddr
	}
	for _, e := range ends {
		if err := configureEnd(e.h, e.l, e.self, e.peer, !c.NoNeigh); err != nil {
			p.moveHome()
			return nil, err
		}
	}
	for _, e := range ends {
		if err := waitOperUp(e.h, e.self.Name, 30*time.Second); err != nil {
			p.moveHome()
			return nil, err
		}
		if err := waitLocalRoute(e.h, e.self.IPv6.Addr(), 10*time.Second); err != nil {
			p.moveHome()
			return nil, err
		}
	}
	return p, nil
}

// takeNICPair reserves a free pair whose NICs are both in this process's
// namespace (a NIC comes back there asynchronously when a namespace that
// held it is deleted).
func takeNICPair(wait time.Duration) (int, [2]string, error) {
	deadline := time.Now().Add(wait)
	for {
		nicPool.Lock()
		for i, pr := range nicPool.pairs {
			if nicPool.busy[i] {
				continue
			}
			_, e1 := netlink.LinkByName(pr[0])
			_, e2 := netlink.LinkByName(pr[1])
			if e1 == nil && e2 == nil {
				nicPool.busy[i] = true
				nicPool.Unlock()
				return i, pr, nil
			}
		}
		nicPool.Unlock()
		if time.Now().After(deadline) {
			return 0, [2]string{}, fmt.Errorf("no NIC pair of %s free after %v", NICPairsEnv, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func releaseNICPair(i int) {
	nicPool.Lock()
	nicPool.busy[i] = false
	nicPool.Unlock()
}

// moveHome moves the pair's NICs back to the process's namespace with
// their addresses off and MTU 1500; a NIC whose namespace is gone is back
// already (or on its way: takeNICPair waits for it).
func (p *Pair) moveHome() error {
	var errs []error
	for _, e := range []*Link{p.A, p.B} {
		h, err := e.NS.netlinkHandle()
		if errors.Is(err, os.ErrClosed) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l, err := h.LinkByName(e.Name)
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			h.Close()
			continue // still at home, or home already
		}
		if err == nil {
			_ = h.LinkSetDown(l)
			_ = h.LinkSetMTU(l, 1500)
			var home int
			if home, err = homeNS(); err == nil {
				err = h.LinkSetNsFd(l, home)
			}
		}
		h.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("move NIC %s home: %w", e.Name, err))
			continue
		}
		// Back home, where the next test looks for it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := netlink.LinkByName(e.Name); err == nil {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("NIC %s moved home but not there after 10 s", e.Name))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// homeFD is the process's own network namespace, opened at init through
// the thread running init (no namespace switch has happened yet). The
// process's pid would name only its main thread's namespace, which a
// namespace switch could be borrowing at that moment.
var homeFD, homeErr = func() (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
}()

func homeNS() (int, error) { return homeFD, homeErr }

// IsNIC reports whether p is a NIC pair of NewNICPair rather than veth.
func (p *Pair) IsNIC() bool { return p.nic > 0 }

// InFlight is how many datagrams a test keeps unacknowledged on p: below
// the 256-entry ring in which veth queues packets for XDP, and, on a NIC
// pair, below virtio_net's 256 receive buffers, so that QEMU never queues
// frames for a NIC whose ring is full (its queue reorders and drops).
func (p *Pair) InFlight() int64 {
	if p.IsNIC() {
		return 64
	}
	return 200
}
