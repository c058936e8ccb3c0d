package txpath

import "github.com/xdpkit/xdpkit/xsk"

// port is what a Sender needs from a socket: its TX and Completion rings
// and the kick. The real one wraps an *xsk.Socket; the package's unit tests
// and benchmarks use one that completes every frame at once, so that the
// cost of building frames can be measured without a device.
type port interface {
	produce(descs []xsk.Desc) int
	txFree() int
	txPending() int
	consume(addrs []uint64) int
	// kick wakes the kernel if it asked for it and reports whether the
	// kernel stopped early (EAGAIN, EBUSY, ENOBUFS): kick again.
	kick() (again bool, err error)
	// closed reports whether the socket is closed: the kernel then
	// completes nothing more.
	closed() bool
}

// sockPort is the port of an AF_XDP socket.
type sockPort struct {
	s    *xsk.Socket
	tx   *xsk.TXRing
	comp *xsk.CompletionRing
}

func (p *sockPort) produce(d []xsk.Desc) int   { return p.tx.Produce(d) }
func (p *sockPort) txFree() int                { return p.tx.Free() }
func (p *sockPort) txPending() int             { return p.tx.Pending() }
func (p *sockPort) consume(addrs []uint64) int { return p.comp.Consume(addrs) }
func (p *sockPort) closed() bool               { return p.s.Closed() }
func (p *sockPort) onClose(f func())           { p.s.OnClose(f) }

func (p *sockPort) kick() (bool, error) {
	before := p.s.Counters().KicksAgain
	if err := p.s.KickTX(); err != nil {
		return false, err
	}
	return p.s.Counters().KicksAgain != before, nil
}
