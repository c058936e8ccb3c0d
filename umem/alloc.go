package umem

import "fmt"

// State is where a frame is. See the package documentation.
type State int

// Frame states.
const (
	Free State = iota // in the allocator
	Held              // owned by the application
	Fill              // on a fill ring
	TX                // on a TX ring, until its completion
)

// String names the state.
func (s State) String() string {
	switch s {
	case Free:
		return "free"
	case Held:
		return "held"
	case Fill:
		return "fill"
	case TX:
		return "tx"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Accounting counts frames by state. Free+Held+Fill+TX == Total.
type Accounting struct {
	Total, Free, Held, Fill, TX int
}

// String gives the frame counts on one line.
func (a Accounting) String() string {
	return fmt.Sprintf("total %d: free %d, held %d, fill %d, tx %d", a.Total, a.Free, a.Held, a.Fill, a.TX)
}

// Accounting returns where the frames are now. Held is derived: frames
// neither free nor on a ring.
func (u *UMEM) Accounting() Accounting {
	u.mu.Lock()
	free := len(u.free)
	u.mu.Unlock()
	fill, tx := int(u.fill.Load()), int(u.tx.Load())
	return Accounting{
		Total: int(u.count),
		Free:  free,
		Fill:  fill,
		TX:    tx,
		Held:  int(u.count) - free - fill - tx,
	}
}

// Moved records that n frames went from one ring state to another (Held,
// Fill, TX). Package xsk calls it once per ring batch; applications that
// drive rings themselves must too, or Accounting goes wrong. Free frames
// move only through Get and Put.
func (u *UMEM) Moved(from, to State, n int) {
	if n == 0 {
		return
	}
	u.add(from, -n)
	u.add(to, n)
}

func (u *UMEM) add(s State, n int) {
	switch s {
	case Fill:
		u.fill.Add(int64(n))
	case TX:
		u.tx.Add(int64(n))
	}
}

// Get takes one free frame and returns its address (the frame's start).
// ok is false when no frame is free.
func (u *UMEM) Get() (addr uint64, ok bool) {
	u.mu.Lock()
	n := len(u.free)
	if n == 0 {
		u.mu.Unlock()
		return 0, false
	}
	addr = u.free[n-1]
	u.free = u.free[:n-1]
	u.isFree[u.index(addr)] = false
	u.mu.Unlock()
	return addr, true
}

// GetBatch fills addrs with free frames and returns how many it took.
func (u *UMEM) GetBatch(addrs []uint64) int {
	u.mu.Lock()
	n := min(len(addrs), len(u.free))
	src := u.free[len(u.free)-n:]
	for i, a := range src {
		addrs[i] = a
		u.isFree[u.index(a)] = false
	}
	u.free = u.free[:len(u.free)-n]
	u.mu.Unlock()
	return n
}

// Put returns the frame that contains addr to the allocator. It returns
// ErrBadAddress for an address outside the UMEM and ErrDoubleFree when
// the frame is free already; in both cases nothing changes.
func (u *UMEM) Put(addr uint64) error {
	u.mu.Lock()
	err := u.put(addr)
	u.mu.Unlock()
	return err
}

// PutBatch returns frames to the allocator. It stops at the first bad
// address (see Put) and returns the error; the frames before it are free.
func (u *UMEM) PutBatch(addrs []uint64) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range addrs {
		if err := u.put(a); err != nil {
			return err
		}
	}
	return nil
}

func (u *UMEM) put(addr uint64) error {
	if u.Unaligned() {
		addr = ExtractAddr(addr)
	}
	i := u.index(addr)
	if i >= uint64(u.count) {
		return fmt.Errorf("%w: %#x", ErrBadAddress, addr)
	}
	if u.isFree[i] {
		return fmt.Errorf("%w: %#x", ErrDoubleFree, addr)
	}
	u.isFree[i] = true
	u.free = append(u.free, i*uint64(u.frameSize)) // capacity is FrameCount: never allocates
	return nil
}

// index is the number of the frame that contains addr.
func (u *UMEM) index(addr uint64) uint64 {
	if u.pow2 {
		return addr >> u.shift
	}
	return addr / uint64(u.frameSize)
}
