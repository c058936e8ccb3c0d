package rxpath

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNapCutShort: a nap that Run's end cuts short says nothing of how
// long a nap lasts or costs. Counting it would set the learned nap length
// (NapTime) to the cut, which is kept across Runs and can keep the
// poller from napping ever after (a nap is taken only while the expected
// gap is shorter than NapTime).
func TestNapCutShort(t *testing.T) {
	p := &Poller{}
	p.napped = func(uintptr) bool { return p.stop.Load() || p.napOver() } // as New sets it
	if err := p.initWait(); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const learned = 40 * time.Microsecond
	p.napLen = learned
	p.napSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(time.Second))}
	p.stop.Store(true) // Run's context ended
	if err := p.nap(); err != nil {
		t.Fatal(err)
	}
	if p.c.naps != 0 || p.napLen != learned {
		t.Errorf("after a nap cut short: naps %d, nap length %v; want 0 and %v", p.c.naps, p.napLen, learned)
	}
	var cur unix.ItimerSpec
	if err := unix.TimerfdGettime(p.tfd, &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Value.Sec != 0 || cur.Value.Nsec != 0 {
		t.Errorf("the nap's timer is still armed: %+v", cur.Value)
	}
}
