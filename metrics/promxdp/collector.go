package promxdp

import (
	"errors"
	"os"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

const ns = "xdpkit"

// Label names.
const (
	LabelInterface = "interface"
	LabelQueue     = "queue"
	LabelPoller    = "poller"
	LabelUMEM      = "umem"
	LabelState     = "state"
)

var sockLabels = []string{LabelInterface, LabelQueue}

func desc(sub, name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(ns, sub, name), help, labels, nil)
}

// A counter read from a struct of counters.
type field[T any] struct {
	d   *prometheus.Desc
	get func(*T) uint64
}

var socketFields = []field[sockSnap]{
	{desc("socket", "rx_dropped_total", "Packets the kernel dropped for reasons other than invalid descriptors (XDP_STATISTICS rx_dropped).", sockLabels...), func(s *sockSnap) uint64 { return s.x.RXDropped }},
	{desc("socket", "rx_invalid_descs_total", "Invalid RX descriptors (XDP_STATISTICS rx_invalid_descs).", sockLabels...), func(s *sockSnap) uint64 { return s.x.RXInvalidDescs }},
	{desc("socket", "tx_invalid_descs_total", "Invalid TX descriptors (XDP_STATISTICS tx_invalid_descs).", sockLabels...), func(s *sockSnap) uint64 { return s.x.TXInvalidDescs }},
	{desc("socket", "rx_ring_full_total", "Packets dropped because the RX ring was full (XDP_STATISTICS rx_ring_full).", sockLabels...), func(s *sockSnap) uint64 { return s.x.RXRingFull }},
	{desc("socket", "rx_fill_ring_empty_total", "Times the Fill ring was empty when a packet came (XDP_STATISTICS rx_fill_ring_empty_descs).", sockLabels...), func(s *sockSnap) uint64 { return s.x.RXFillRingEmptyDesc }},
	{desc("socket", "tx_ring_empty_total", "Times the kernel found the TX ring empty (XDP_STATISTICS tx_ring_empty_descs).", sockLabels...), func(s *sockSnap) uint64 { return s.x.TXRingEmptyDescs }},
	{desc("socket", "tx_kicks_total", "sendto kicks.", sockLabels...), func(s *sockSnap) uint64 { return s.c.KicksTX }},
	{desc("socket", "rx_kicks_total", "recvfrom kicks.", sockLabels...), func(s *sockSnap) uint64 { return s.c.KicksRX }},
	{desc("socket", "kicks_again_total", "Kicks answered EAGAIN, EBUSY or ENOBUFS.", sockLabels...), func(s *sockSnap) uint64 { return s.c.KicksAgain }},
}

type sockSnap struct {
	x xsk.Stats
	c xsk.Counters
}

var pollerFields = []field[rxpath.Stats]{
	{desc("poller", "rounds_total", "Polling rounds.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Rounds }},
	{desc("poller", "full_rounds_total", "Rounds that ended on their budget.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.FullRounds }},
	{desc("poller", "time_rounds_total", "Rounds that ended on their time limit.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.TimeRounds }},
	{desc("poller", "packets_total", "Packets taken off the RX rings, delivered or dropped.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Packets }},
	{desc("poller", "frames_total", "Descriptors taken off the RX rings.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Frames }},
	{desc("poller", "bytes_total", "Bytes delivered.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Bytes }},
	{desc("poller", "copied_total", "Packets delivered as copies.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Copied }},
	{desc("poller", "lent_total", "Packets delivered zero-copy.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Lent }},
	{desc("poller", "chains_total", "Multi-buffer packets delivered.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Chains }},
	{desc("poller", "kept_total", "Lent packets the handler kept.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Kept }},
	{desc("poller", "dropped_total", "Packets dropped for a bad descriptor.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Dropped }},
	{desc("poller", "invalid_total", "Descriptors outside the UMEM or naming a frame not lent.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Invalid }},
	{desc("poller", "spins_total", "Empty rounds polled again at once instead of sleeping.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Spins }},
	{desc("poller", "preempted_total", "Spins the scheduler interrupted.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Preempted }},
	{desc("poller", "naps_total", "Timed naps taken while packets flow (timer: Config.Coalesce or its default, within Config.MaxDelay).", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Naps }},
	{desc("poller", "naps_empty_total", "Naps after which the next round took nothing.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.NapsEmpty }},
	{desc("poller", "sleeps_total", "Times the poller went to sleep.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Sleeps }},
	{desc("poller", "thread_wakeups_total", "Wakeups from a ppoll on the poller's own thread (while packets flow, unless Config.RuntimeSleep).", LabelPoller), func(s *rxpath.Stats) uint64 { return s.ThreadWakeups }},
	{desc("poller", "wakeups_total", "Sleeps ended by a readable socket.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Wakeups }},
	{desc("poller", "syscalls_total", "System calls made by the poller.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.Syscalls }},
	{desc("poller", "fill_empty_total", "Refills that found a Fill ring empty.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.FillEmpty }},
	{desc("poller", "fill_starved_total", "Refills that found no frame for an empty Fill ring.", LabelPoller), func(s *rxpath.Stats) uint64 { return s.FillStarved }},
}

var pollerSockLabels = []string{LabelPoller, LabelInterface, LabelQueue}

var pollerSockFields = []field[rxpath.SocketStats]{
	{desc("poller", "socket_packets_total", "Packets taken off the socket's RX ring.", pollerSockLabels...), func(s *rxpath.SocketStats) uint64 { return s.Packets }},
	{desc("poller", "socket_frames_total", "Descriptors taken off the socket's RX ring.", pollerSockLabels...), func(s *rxpath.SocketStats) uint64 { return s.Frames }},
	{desc("poller", "socket_visits_total", "Visits of the poller to the socket.", pollerSockLabels...), func(s *rxpath.SocketStats) uint64 { return s.Visits }},
}

var senderFields = []field[txpath.Stats]{
	{desc("sender", "packets_total", "Packets queued.", sockLabels...), func(s *txpath.Stats) uint64 { return s.Packets }},
	{desc("sender", "bytes_total", "Bytes of the packets queued.", sockLabels...), func(s *txpath.Stats) uint64 { return s.Bytes }},
	{desc("sender", "descs_total", "Descriptors queued.", sockLabels...), func(s *txpath.Stats) uint64 { return s.Descs }},
	{desc("sender", "batches_total", "Flushes that submitted descriptors.", sockLabels...), func(s *txpath.Stats) uint64 { return s.Batches }},
	{desc("sender", "kicks_total", "Kick attempts.", sockLabels...), func(s *txpath.Stats) uint64 { return s.Kicks }},
	{desc("sender", "kicks_again_total", "Kicks answered EAGAIN, EBUSY or ENOBUFS.", sockLabels...), func(s *txpath.Stats) uint64 { return s.KicksAgain }},
	{desc("sender", "completed_total", "Frames reaped from the Completion ring.", sockLabels...), func(s *txpath.Stats) uint64 { return s.Completed }},
	{desc("sender", "offloaded_total", "Packets with a checksum offload request.", sockLabels...), func(s *txpath.Stats) uint64 { return s.Offloaded }},
	{desc("sender", "nt_copies_total", "Packets whose payload was copied with nontemporal stores.", sockLabels...), func(s *txpath.Stats) uint64 { return s.NTCopies }},
}

var (
	umemFrames   = desc("umem", "frames", "Frames of the UMEM by where they are: free, held by the application, on Fill rings, on TX rings.", LabelUMEM, LabelState)
	umemCapacity = desc("umem", "frames_capacity", "Frames in the UMEM.", LabelUMEM)
)

type socketEntry struct {
	s      *xsk.Socket
	labels []string
}

type pollerEntry struct {
	p     *rxpath.Poller
	name  string
	socks [][]string // label values of each socket, in the poller's order
}

type senderEntry struct {
	stats  func() txpath.Stats
	labels []string
}

type umemEntry struct {
	u    *umem.UMEM
	name string
}

// Collector is a prometheus.Collector over sockets, pollers, senders and
// UMEMs. Add and Remove may be called at any time, also while a scrape
// runs. The zero value is not usable; call New.
type Collector struct {
	mu      sync.Mutex
	sockets map[*xsk.Socket]socketEntry
	pollers map[*rxpath.Poller]pollerEntry
	senders map[any]senderEntry
	umems   map[*umem.UMEM]umemEntry
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns an empty Collector.
func New() *Collector {
	return &Collector{
		sockets: map[*xsk.Socket]socketEntry{},
		pollers: map[*rxpath.Poller]pollerEntry{},
		senders: map[any]senderEntry{},
		umems:   map[*umem.UMEM]umemEntry{},
	}
}

func sockLabelValues(s *xsk.Socket) []string {
	return []string{s.Ifname(), strconv.Itoa(s.Queue())}
}

// AddSocket exports s's XDP_STATISTICS and kick counts, labelled by its
// interface and queue. A socket that is closed is left out of scrapes;
// RemoveSocket forgets it.
func (c *Collector) AddSocket(s *xsk.Socket) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sockets[s] = socketEntry{s: s, labels: sockLabelValues(s)}
}

// RemoveSocket forgets s.
func (c *Collector) RemoveSocket(s *xsk.Socket) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sockets, s)
}

// AddPoller exports p's counters labelled poller=name, and its per-socket
// counters labelled also by interface and queue. socks are the sockets
// given to rxpath.New, in the same order. The sockets' XDP_STATISTICS
// come from AddSocket, not from here.
func (c *Collector) AddPoller(name string, p *rxpath.Poller, socks ...*xsk.Socket) {
	e := pollerEntry{p: p, name: name}
	for _, s := range socks {
		e.socks = append(e.socks, sockLabelValues(s))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pollers[p] = e
}

// RemovePoller forgets p.
func (c *Collector) RemovePoller(p *rxpath.Poller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pollers, p)
}

// AddSender exports a Sender's counters, labelled by the interface and
// queue of sock, the socket it sends on. stats is called on every scrape,
// from the scraping goroutine. A Sender is used from one goroutine, and
// its Stats method must not run concurrently with its sends; so stats
// returns a copy that the sending goroutine publishes (for instance under
// a mutex after each batch), or calls Stats on a Sender that is no longer
// sending. key identifies the sender for RemoveSender (the *txpath.Sender,
// usually).
func (c *Collector) AddSender(key any, sock *xsk.Socket, stats func() txpath.Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.senders[key] = senderEntry{stats: stats, labels: sockLabelValues(sock)}
}

// RemoveSender forgets the sender added with key.
func (c *Collector) RemoveSender(key any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.senders, key)
}

// AddUMEM exports u's frame accounting, labelled umem=name.
func (c *Collector) AddUMEM(name string, u *umem.UMEM) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.umems[u] = umemEntry{u: u, name: name}
}

// RemoveUMEM forgets u.
func (c *Collector) RemoveUMEM(u *umem.UMEM) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.umems, u)
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range socketFields {
		ch <- f.d
	}
	for _, f := range pollerFields {
		ch <- f.d
	}
	for _, f := range pollerSockFields {
		ch <- f.d
	}
	for _, f := range senderFields {
		ch <- f.d
	}
	ch <- umemFrames
	ch <- umemCapacity
}

func counter(d *prometheus.Desc, v uint64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

// Collect reads every counter now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sockets := make([]socketEntry, 0, len(c.sockets))
	for _, e := range c.sockets {
		sockets = append(sockets, e)
	}
	pollers := make([]pollerEntry, 0, len(c.pollers))
	for _, e := range c.pollers {
		pollers = append(pollers, e)
	}
	senders := make([]senderEntry, 0, len(c.senders))
	for _, e := range c.senders {
		senders = append(senders, e)
	}
	umems := make([]umemEntry, 0, len(c.umems))
	for _, e := range c.umems {
		umems = append(umems, e)
	}
	c.mu.Unlock()

	for _, e := range sockets {
		x, err := e.s.Stats()
		if errors.Is(err, os.ErrClosed) {
			continue
		}
		if err != nil {
			ch <- prometheus.NewInvalidMetric(socketFields[0].d, err)
			continue
		}
		snap := sockSnap{x: x, c: e.s.Counters()}
		for _, f := range socketFields {
			ch <- counter(f.d, f.get(&snap), e.labels...)
		}
	}
	for _, e := range pollers {
		// The error is that of XDP_STATISTICS, which AddSocket exports;
		// the poller's own counters are valid regardless.
		st, _ := e.p.Stats()
		for _, f := range pollerFields {
			ch <- counter(f.d, f.get(&st), e.name)
		}
		for i := range st.Sockets {
			if i >= len(e.socks) {
				break
			}
			labels := append([]string{e.name}, e.socks[i]...)
			for _, f := range pollerSockFields {
				ch <- counter(f.d, f.get(&st.Sockets[i]), labels...)
			}
		}
	}
	for _, e := range senders {
		st := e.stats()
		for _, f := range senderFields {
			ch <- counter(f.d, f.get(&st), e.labels...)
		}
	}
	for _, e := range umems {
		a := e.u.Accounting()
		ch <- prometheus.MustNewConstMetric(umemCapacity, prometheus.GaugeValue, float64(a.Total), e.name)
		for _, s := range []struct {
			state string
			n     int
		}{{"free", a.Free}, {"held", a.Held}, {"fill", a.Fill}, {"tx", a.TX}} {
			ch <- prometheus.MustNewConstMetric(umemFrames, prometheus.GaugeValue, float64(s.n), e.name, s.state)
		}
	}
}
