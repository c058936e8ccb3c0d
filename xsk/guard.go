package xsk

import (
	"runtime"
	"sync/atomic"
)

// guard lets Close run while other goroutines use the rings: every ring
// operation and kick enters the guard (one atomic add) and leaves it
// (another); Close marks the guard closed, after which entries fail, and
// waits for the operations in progress to leave before it unmaps the
// rings and closes the socket. Without it, a Close racing a ring access
// would unmap memory under the reader's feet.
type guard struct {
	n atomic.Int64 // users in progress, plus closedBit once closed
}

const closedBit = 1 << 62

// enter reports whether the socket is open, and if so counts a user until
// exit.
func (g *guard) enter() bool {
	if g.n.Add(1)&closedBit != 0 {
		g.n.Add(-1)
		return false
	}
	return true
}

func (g *guard) exit() { g.n.Add(-1) }

// close makes every later enter fail and waits until no user is left.
func (g *guard) close() {
	g.n.Add(closedBit)
	for g.n.Load() != closedBit {
		runtime.Gosched()
	}
}
