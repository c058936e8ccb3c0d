package xsk

import "sync"

// afterClose holds the functions OnClose registered.
type afterClose struct {
	mu   sync.Mutex
	done bool
	fns  []func()
}

func (a *afterClose) add(f func()) (now bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return true
	}
	a.fns = append(a.fns, f)
	return false
}

func (a *afterClose) run() {
	a.mu.Lock()
	fns := a.fns
	a.fns, a.done = nil, true
	a.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// OnClose registers f to run once, at the end of the socket's Close, after
// its descriptor is closed and the kernel can no longer touch its frames;
// f runs at once when the socket is closed already. Close runs the
// functions in the order they were registered, on its own goroutine.
//
// This is how rxpath.Poller and txpath.Sender give back the frames that
// the kernel still held when they were closed before the socket, so that
// closing everything in the reverse order of creation (plain defers)
// leaves every frame free.
func (s *Socket) OnClose(f func()) {
	if s.after.add(f) {
		f()
	}
}
