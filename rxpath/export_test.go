package rxpath

import (
	"time"

	"golang.org/x/sys/unix"
)

// NapThenSleep does outside Run what Run's idle path does after packets
// stopped: it fills every Fill ring, naps once (for nap), then sleeps
// until a socket is readable or timeout passes, and reports whether a
// socket ended the sleep.
func NapThenSleep(p *Poller, nap, timeout time.Duration) (woke bool, err error) {
	for _, s := range p.socks {
		if err := p.refill(s, true); err != nil {
			return false, err
		}
	}
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(nap))}
	if err := p.nap(); err != nil {
		return false, err
	}
	woke, _, err = p.sleep(timeout)
	p.publish()
	return woke, err
}

// Sleep drains the RX rings (a round with a handler that drops every
// packet) and then sleeps as Run does, for at most timeout.
func Sleep(p *Poller, timeout time.Duration) (woke, quiet bool, err error) {
	for _, s := range p.socks {
		if err := p.refill(s, true); err != nil {
			return false, false, err
		}
	}
	p.h = HandlerFunc(func(*Packet) {})
	defer func() { p.h = nil }()
	if _, _, err := p.round(); err != nil {
		return false, false, err
	}
	return p.sleep(timeout)
}

// Recycles reports whether any socket of p refills as one whose frames
// come back through Recycle. Call it only on Run's goroutine or outside
// Run.
func Recycles(p *Poller) bool {
	for _, s := range p.socks {
		if s.recycles {
			return true
		}
	}
	return false
}

// FirstAddr is the address of the first descriptor of p, a packet lent to
// Receive (not copied).
func FirstAddr(p *Packet) uint64 { return p.descs[0].Addr }
