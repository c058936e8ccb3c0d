package xsk

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/internal/xdpprog"
)

// TXProgram says when a socket that only transmits gets a native XDP
// program that passes every packet to the kernel.
type TXProgram int

// TX program rules.
const (
	// TXProgramAuto attaches one to a zero-copy socket where the driver
	// table says the driver needs one for zero-copy TX (DriverNotes).
	TXProgramAuto TXProgram = iota
	// TXProgramAlways attaches one whatever the driver and bind mode.
	TXProgramAlways
	// TXProgramNever attaches none.
	TXProgramNever
)

// String names the rule.
func (r TXProgram) String() string {
	switch r {
	case TXProgramAuto:
		return "auto"
	case TXProgramAlways:
		return "always"
	case TXProgramNever:
		return "never"
	}
	return fmt.Sprintf("TXProgram(%d)", int(r))
}

// ParseTXProgram parses "auto", "always" or "never".
func ParseTXProgram(s string) (TXProgram, error) {
	for _, r := range []TXProgram{TXProgramAuto, TXProgramAlways, TXProgramNever} {
		if s == r.String() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("xsk: TX program rule %q: want auto, always or never", s)
}

// txProgramNeeded is the rule's decision for a socket on driver, bound
// in zero-copy or not.
func txProgramNeeded(rule TXProgram, driver string, zeroCopy bool) bool {
	switch rule {
	case TXProgramAlways:
		return true
	case TXProgramAuto:
		d, ok := drivers[driver]
		return ok && d.TXProgram && zeroCopy
	}
	return false
}

// txProgs holds the pass programs attached for TX, one per interface,
// shared by the sockets that asked for it.
var txProgs = struct {
	sync.Mutex
	m map[txProgKey]*txProg
}{m: map[txProgKey]*txProg{}}

type txProgKey struct {
	netns   uint64 // inode of the network namespace
	ifindex int
}

type txProg struct {
	p    *xdpprog.Program
	refs int
}

// AttachTXProgram attaches, as rule says, a native XDP program that
// passes every packet to the kernel to the interface of s, so that a
// driver that sends zero-copy frames only while a program is attached
// sends them, and detaches it when the last socket that asked for it on
// that interface closes. It reports whether a program of its own is in
// place for s. An interface that already has another XDP program keeps
// it, which serves as well: (false, nil).
func (s *Socket) AttachTXProgram(rule TXProgram) (bool, error) {
	if rule < TXProgramAuto || rule > TXProgramNever {
		return false, fmt.Errorf("xsk: TX program rule %v", rule)
	}
	if !txProgramNeeded(rule, s.driverName(), s.zc) {
		return false, nil
	}
	ns, err := netnsInode()
	if err != nil {
		return false, err
	}
	key := txProgKey{ns, s.ifindex}
	txProgs.Lock()
	defer txProgs.Unlock()
	tp := txProgs.m[key]
	if tp == nil {
		p, err := xdpprog.LoadPass()
		if err != nil {
			return false, attachError(err)
		}
		if _, err := p.Attach(s.ifindex, xdpprog.ModeNative); err != nil {
			p.Close()
			if errors.Is(err, xdpprog.ErrBusy) {
				return false, nil
			}
			return false, fmt.Errorf("xsk: attach the TX program (a native XDP program that passes everything) to %s: %w", s.ifname, attachError(err))
		}
		tp = &txProg{p: p}
		txProgs.m[key] = tp
	}
	tp.refs++
	s.OnClose(func() { releaseTXProgram(key) })
	return true, nil
}

func releaseTXProgram(key txProgKey) {
	txProgs.Lock()
	defer txProgs.Unlock()
	tp := txProgs.m[key]
	if tp == nil {
		return
	}
	if tp.refs--; tp.refs == 0 {
		delete(txProgs.m, key)
		tp.p.Close() // detaching a bpf_link fails only for a gone interface
	}
}

// TXProgramAttached reports whether the interface named ifname, in the
// calling thread's network namespace, has a TX program that
// AttachTXProgram attached.
func TXProgramAttached(ifname string) bool {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return false
	}
	ns, err := netnsInode()
	if err != nil {
		return false
	}
	txProgs.Lock()
	defer txProgs.Unlock()
	return txProgs.m[txProgKey{ns, ifi.Index}] != nil
}

// driverName reads the driver of s's interface; "" when unknown.
func (s *Socket) driverName() string {
	info, err := netdev.GetByIndex(s.ifindex)
	if err != nil {
		return ""
	}
	return info.Driver
}

// netnsInode identifies the calling thread's network namespace.
func netnsInode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, os.NewSyscallError("stat /proc/thread-self/ns/net", err)
	}
	return st.Ino, nil
}
