package xdpnet

import (
	"sync"
	"time"
)

// deadline is a read or write deadline that wakes blocked callers when it
// passes or is moved into the past. One timer serves all its settings: it
// is reset, not made again, so that a server which sets a deadline before
// every read (as miekg/dns does) allocates nothing for it.
type deadline struct {
	mu     sync.Mutex
	t      time.Time
	timer  *time.Timer
	expire chan struct{} // closed once t has passed
}

func (d *deadline) init() {
	d.expire = make(chan struct{})
	d.timer = time.AfterFunc(time.Hour, d.fire)
	d.timer.Stop()
}

// fire runs on the timer: it closes expire if the deadline set now has
// passed (a timer of an earlier setting may fire late and finds a later
// deadline).
func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.t.IsZero() && !time.Now().Before(d.t) && !closed(d.expire) {
		close(d.expire)
	}
}

// set moves the deadline to t (zero: none). A caller blocked on wait sees
// the new deadline: woken at once for one in the past, kept waiting for
// one in the future.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer.Stop()
	d.t = t
	if closed(d.expire) {
		d.expire = make(chan struct{})
	}
	if t.IsZero() {
		return
	}
	if dur := time.Until(t); dur > 0 {
		d.timer.Reset(dur)
		return
	}
	close(d.expire)
}

// wait returns the channel that is closed when the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.expire
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer.Stop()
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
