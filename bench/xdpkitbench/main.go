package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/internal/pkt"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

const (
	allocEvery = 1 << 14                // receivers read the allocation count every this many packets
	idleSpins  = 64                     // empty rounds before sleeping, as xdpbench
	drainTime  = 200 * time.Millisecond // wait for the last completions
	maxSeconds = 3600
	ethLen     = 14
	ipLen      = 20
	udpLen     = 8
	minFrame   = ethLen + ipLen + udpLen
)

type options struct {
	mode              string
	ifname, outIfname string
	queue, outQueue   int
	size, batch       int
	duration          int
	count             uint64
	frameSize, frames int
	ring              int
	cpu               int
	generic, zc       bool
	noWakeup          bool
	txBudget          int
	tx                string
	l3                bool
	srcMAC, dstMAC    net.HardwareAddr
	srcIP, dstIP      netip.Addr
	srcPort, dstPort  int
	idleRounds        int           // rxdrop: rxpath.Config.IdleRounds
	coalesce          time.Duration // rxdrop, fwd: rxpath.Config.Coalesce
	maxDelay          time.Duration // rxdrop, fwd: rxpath.Config.MaxDelay
	prefetch          bool          // rxpath.Config.Prefetch
	fillFrames        int           // fwd: rxpath.Config.FillFrames (0: the Fill ring's size)
	busyPoll          int           // rxdrop: busy-poll budget (0: off)
	napiDefer         int           // rxdrop: napi_defer_hard_irqs of -i's NAPIs (-1: leave; set with napiFlush)
	napiFlush         time.Duration // rxdrop: gro_flush_timeout of -i's NAPIs (-1: leave)
	runtimeSleep      bool          // rxdrop, fwd: rxpath.Config.RuntimeSleep
	latency           bool          // rxdrop: one-way delay of stamped packets (latency.go)
}

var o options

// stop is set by SIGINT/SIGTERM, and stopped is closed then.
var (
	stop    atomic.Bool
	stopped = make(chan struct{})
)

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "xdpkitbench: "+format+"\n", args...)
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	os.Exit(1)
}

// undo holds what die must put back before it exits (NAPI settings), in
// the order it was changed.
var undo []func()

type macFlag struct{ p *net.HardwareAddr }

func (m macFlag) String() string {
	if m.p == nil || *m.p == nil {
		return ""
	}
	return m.p.String()
}

func (m macFlag) Set(s string) error {
	a, err := net.ParseMAC(s)
	if err != nil || len(a) != 6 {
		return fmt.Errorf("want a MAC address, got %q", s)
	}
	*m.p = a
	return nil
}

type ipFlag struct{ p *netip.Addr }

func (f ipFlag) String() string {
	if f.p == nil {
		return ""
	}
	return f.p.String()
}

func (f ipFlag) Set(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return fmt.Errorf("want an IPv4 address, got %q", s)
	}
	*f.p = a
	return nil
}

func parseArgs(args []string) {
	fs := flag.NewFlagSet("xdpkitbench", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	str := func(p *string, short, long, def, usage string) {
		if short != "" {
			fs.StringVar(p, short, def, usage)
		}
		fs.StringVar(p, long, def, usage)
	}
	num := func(p *int, short, long string, def int, usage string) {
		if short != "" {
			fs.IntVar(p, short, def, usage)
		}
		fs.IntVar(p, long, def, usage)
	}
	boolean := func(p *bool, short, long, usage string) {
		if short != "" {
			fs.BoolVar(p, short, false, usage)
		}
		fs.BoolVar(p, long, false, usage)
	}
	str(&o.mode, "m", "mode", "txonly", "txonly | gen | rxdrop | fwd")
	str(&o.ifname, "i", "iface", "", "interface (fwd: the receiving one)")
	str(&o.outIfname, "o", "out-iface", "", "fwd: the transmitting interface (-i, and --out-queue -q: a hairpin through one socket on that queue)")
	num(&o.queue, "q", "queue", 0, "queue of -i")
	num(&o.outQueue, "", "out-queue", 0, "fwd: queue of -o")
	num(&o.size, "s", "size", 64, "txonly: frame bytes incl. Ethernet header")
	num(&o.batch, "b", "batch", 64, "descriptors per ring operation")
	num(&o.duration, "d", "duration", 5, "seconds to run, 1..3600")
	var count string
	str(&count, "n", "count", "0", "stop after N frames (0: no limit)")
	num(&o.frameSize, "f", "frame-size", 4096, "UMEM chunk size, 2048 or 4096")
	num(&o.frames, "F", "frames", 4096, "UMEM frames")
	num(&o.ring, "r", "ring", 2048, "size of every ring, a power of two")
	num(&o.cpu, "c", "cpu", -1, "pin to CPU N")
	boolean(&o.generic, "S", "skb-mode", "attach XDP in generic (skb) mode, not native")
	boolean(&o.zc, "z", "zero-copy", "bind with XDP_ZEROCOPY instead of XDP_COPY")
	boolean(&o.noWakeup, "", "no-wakeup", "bind without XDP_USE_NEED_WAKEUP")
	boolean(&o.l3, "", "l3", "fwd: route: parse, decrement the TTL (checksum updated), drop what must not be routed, then rewrite the MACs")
	num(&o.txBudget, "", "tx-budget", 0, "txonly, fwd: set XDP_MAX_TX_SKB_BUDGET on the TX socket (Linux 6.17; the JSON's tx_budget is what the kernel took, 0 if none)")
	str(&o.tx, "", "tx", "sender", "txonly: sender (txpath.Sender) | ring (xsk's TX ring kept full)")
	fs.Var(macFlag{&o.srcMAC}, "src-mac", "txonly: source MAC (the interface's)")
	fs.Var(macFlag{&o.dstMAC}, "dst-mac", "txonly, fwd: destination MAC (required)")
	o.srcIP = netip.MustParseAddr("198.18.0.1")
	o.dstIP = netip.MustParseAddr("198.18.0.2")
	fs.Var(ipFlag{&o.srcIP}, "src-ip", "txonly: source IPv4")
	fs.Var(ipFlag{&o.dstIP}, "dst-ip", "txonly: destination IPv4")
	num(&o.srcPort, "", "src-port", 12345, "txonly: UDP source port")
	num(&o.dstPort, "", "dst-port", 9, "txonly: UDP destination port")
	num(&o.fillFrames, "", "fill-frames", 0, "fwd: frames kept on the Fill ring, rxpath.Config.FillFrames (0: the ring's size)")
	num(&o.idleRounds, "", "idle-rounds", 0, "rxdrop: rxpath.Config.IdleRounds (0: the poller's default)")
	num(&o.busyPoll, "", "busy-poll", 0, "rxdrop: busy-poll with this budget (xsk PreferBusyPoll, rxpath BusyPoll; 0: off)")
	fs.BoolVar(&o.prefetch, "prefetch", false, "rxdrop and fwd: rxpath.Config.Prefetch, read the cache lines of every packet's first 128 bytes for a batch before handing over the first")
	fs.DurationVar(&o.maxDelay, "max-delay", 0, "rxdrop, fwd: rxpath.Config.MaxDelay, the most a packet may wait on the ring by the poller's choice (0, the default: no naps unless --coalesce is set; negative: never; positive: nap within it while packets flow)")
	fs.DurationVar(&o.coalesce, "coalesce", 0, "rxdrop, fwd: rxpath.Config.Coalesce, the poller's nap while packets flow (0: its default; negative: never nap)")
	num(&o.napiDefer, "", "napi-defer", -1, "rxdrop: set napi_defer_hard_irqs of -i's NAPIs for the run (xsk.SetNAPIDeferral; -1: leave; with --napi-gro-flush)")
	fs.DurationVar(&o.napiFlush, "napi-gro-flush", -1, "rxdrop: set gro_flush_timeout of -i's NAPIs for the run (-1: leave; with --napi-defer)")
	boolean(&o.latency, "", "latency", "rxdrop: one-way delay of xdpgen -timestamp's packets (p50, p99, p99.9) and the process's CPU time, as xdpbench --latency")
	boolean(&o.runtimeSleep, "", "runtime-sleep", "rxdrop, fwd: rxpath.Config.RuntimeSleep: sleep in the Go runtime's poller also while packets flow, not in ppoll(2) on the poller's thread")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(1)
	}
	if fs.NArg() > 0 {
		die("unexpected argument %q (see -h)", fs.Arg(0))
	}
	var err error
	if o.count, err = strconv.ParseUint(count, 10, 63); err != nil {
		die("-n: %v", err)
	}
	switch {
	case o.mode == "gen":
		o.mode = "txonly"
	case o.mode != "txonly" && o.mode != "rxdrop" && o.mode != "fwd":
		die("-m: unknown mode %q (txonly, gen, rxdrop, fwd)", o.mode)
	}
	switch {
	case o.ifname == "":
		die("-i IF is required (see -h)")
	case o.mode == "fwd" && o.outIfname == "":
		die("fwd needs -o IF")
	case (o.mode == "txonly" || o.mode == "fwd") && o.dstMAC == nil:
		die("%s needs --dst-mac", o.mode)
	case o.size < minFrame || o.size > o.frameSize:
		die("-s %d: want %d..%d", o.size, minFrame, o.frameSize)
	case o.frameSize != 2048 && o.frameSize != 4096:
		die("-f %d: want 2048 or 4096", o.frameSize)
	case o.ring < 64 || o.ring&(o.ring-1) != 0:
		die("-r %d: want a power of two, at least 64", o.ring)
	case o.batch < 1 || o.batch > o.ring:
		die("-b %d: want 1..%d (not larger than the rings)", o.batch, o.ring)
	case o.duration < 1 || o.duration > maxSeconds:
		die("-d %d: want 1..%d", o.duration, maxSeconds)
	case o.frames < 64:
		die("-F %d: want at least 64", o.frames)
	case o.tx != "sender" && o.tx != "ring":
		die("--tx %q: want sender or ring", o.tx)
	case o.l3 && o.mode != "fwd":
		die("--l3 is only for fwd")
	case o.txBudget != 0 && o.mode == "rxdrop":
		die("--tx-budget is for txonly and fwd (rxdrop has no TX ring)")
	case (o.napiDefer >= 0) != (o.napiFlush >= 0):
		die("--napi-defer and --napi-gro-flush go together")
	case o.napiDefer >= 0 && o.mode != "rxdrop":
		die("--napi-defer and --napi-gro-flush are only for rxdrop")
	case o.fillFrames != 0 && o.mode != "fwd":
		die("--fill-frames is only for fwd")
	case o.fillFrames < 0 || o.fillFrames > min(o.ring, o.frames):
		die("--fill-frames %d: want 0..%d (the ring and the UMEM's frames)", o.fillFrames, min(o.ring, o.frames))
	}
}

// hairpin: fwd sends out of the queue it receives on (-o equal to -i,
// --out-queue to -q), through one socket.
func hairpin() bool {
	return o.mode == "fwd" && o.outIfname == o.ifname && o.outQueue == o.queue
}

// pin binds every thread of the process to cpu (threads created later
// inherit it) and runs the Go scheduler on one P (and the Poller on one
// more: see poller).
func pin(cpu int) {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		die("pin: %v", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			die("pin to CPU %d: %v", cpu, err)
		}
	}
	runtime.GOMAXPROCS(1)
}

func socketConfig(noRX, noTX bool) *xsk.Config {
	c := &xsk.Config{
		RXSize: uint32(o.ring), TXSize: uint32(o.ring), FillSize: uint32(o.ring), CompletionSize: uint32(o.ring),
		NoRX: noRX, NoTX: noTX, Mode: xsk.ModeCopy, NoNeedWakeup: o.noWakeup,
	}
	if !noTX {
		c.MaxTXBudget = uint32(o.txBudget) // fwd: the out socket's; the in one has no TX ring
	}
	if o.zc {
		c.Mode = xsk.ModeZeroCopy
	}
	return c
}

func newUMEM() *umem.UMEM {
	u, err := umem.New(&umem.Config{FrameSize: uint32(o.frameSize), FrameCount: uint32(o.frames)})
	if err != nil {
		die("UMEM: %v", err)
	}
	return u
}

func attach(s *xsk.Socket) *xsk.Program {
	mode := xsk.AttachNative
	if o.generic {
		mode = xsk.AttachGeneric
	}
	p, err := xsk.AttachProgram(s.Ifname(), &xsk.ProgramConfig{Mode: mode})
	if err != nil {
		die("attach XDP to %s: %v", s.Ifname(), err)
	}
	if err := p.Register(s); err != nil {
		p.Close()
		die("register socket: %v", err)
	}
	return p
}

func macOf(ifname string) net.HardwareAddr {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		die("%s: %v", ifname, err)
	}
	return ifi.HardwareAddr
}

func ready() {
	out := ""
	if o.outIfname != "" && o.mode == "fwd" {
		out = " -> " + o.outIfname
	}
	fmt.Fprintf(os.Stderr, "xdpkitbench: ready: %s on %s%s\n", o.mode, o.ifname, out)
}

// spareThreads leaves at least n idle threads in the runtime's pool
// besides the caller's. The Poller yields its P every few milliseconds
// while packets flow (runtime.Gosched), and a yield wakes an idle thread
// to look for work on the idle P; where the pool has none idle, the
// runtime starts one, and a new thread allocates (its m and g
// structures). That happens once, early in a run or not
// at all, depending on where the set-up left the pool's threads: it is
// the runtime's start-up, not the loop's, and would make the allocation
// count a coin flip. Two: one thread may wait in the network poller
// without a P while the Poller's holds its own, and the yield wants
// another for the idle P. Each goroutine here holds a thread while it
// waits (LockOSThread), taking an idle one or making the runtime start
// one; released, the threads go idle and stay in the pool (the runtime
// never ends an idle thread).
func spareThreads(n int) {
	var held sync.WaitGroup
	release := make(chan struct{})
	held.Add(n)
	for range n {
		go func() {
			runtime.LockOSThread()
			held.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	held.Wait()
	close(release)
}

// allocSample reads the process's cumulative heap allocation count
// without stopping the world or allocating.
var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}

func mallocs() uint64 {
	metrics.Read(allocSample)
	if allocSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return allocSample[0].Value.Uint64()
}

func mpps(frames uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(frames) / d.Seconds() / 1e6
}

func main() {
	parseArgs(os.Args[1:])
	if o.cpu >= 0 {
		pin(o.cpu)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		stop.Store(true)
		close(stopped)
	}()
	switch o.mode {
	case "txonly":
		runTX()
	case "rxdrop":
		runRX(false)
	case "fwd":
		runRX(true)
	}
}

// buildPacket writes an Ethernet + IPv4 + UDP frame of o.size bytes with
// valid checksums into p (the packet xdpbench sends).
func buildPacket(p []byte, src net.HardwareAddr) {
	ip, udp := p[ethLen:], p[ethLen+ipLen:]
	ulen := o.size - ethLen - ipLen
	copy(p, o.dstMAC)
	copy(p[6:], src)
	binary.BigEndian.PutUint16(p[12:], 0x0800)
	clear(ip[:ipLen])
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(o.size-ethLen))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[8], ip[9] = 64, 17
	s4, d4 := o.srcIP.As4(), o.dstIP.As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	binary.BigEndian.PutUint16(ip[10:], csum.IPv4Header(ip[:ipLen]))
	binary.BigEndian.PutUint16(udp, uint16(o.srcPort))
	binary.BigEndian.PutUint16(udp[2:], uint16(o.dstPort))
	binary.BigEndian.PutUint16(udp[4:], uint16(ulen))
	binary.BigEndian.PutUint16(udp[6:], 0)
	for i := udpLen; i < ulen; i++ {
		udp[i] = byte(i)
	}
	s := csum.PseudoHeaderIPv4(s4, d4, csum.ProtoUDP, uint16(ulen))
	binary.BigEndian.PutUint16(udp[6:], csum.FinishUDP(csum.Sum(udp[:ulen], s)))
}

func runTX() {
	src := o.srcMAC
	if src == nil {
		src = macOf(o.ifname)
	}
	u := newUMEM()
	for i := 0; i < o.frames; i++ {
		buildPacket(u.Frame(uint64(i*o.frameSize)), src)
	}
	sock, err := xsk.New(o.ifname, o.queue, u, socketConfig(true, false))
	if err != nil {
		die("socket on %s queue %d: %v", o.ifname, o.queue, err)
	}
	if o.tx == "ring" {
		runTXRing(sock)
		return
	}
	s, err := txpath.New(sock, &txpath.Config{Policy: txpath.Plain, BatchSize: o.batch, Device: &txpath.Device{}})
	if err != nil {
		die("sender: %v", err)
	}
	ready()

	time.Sleep(time.Microsecond) // the goroutine's sleep timer is allocated on first use
	m0 := mallocs()
	start := time.Now()
	deadline := start.Add(time.Duration(o.duration) * time.Second)
	var submitted uint64
	idle := 0
	for !stop.Load() && time.Now().Before(deadline) {
		if o.count > 0 && s.Stats().Completed >= o.count {
			break
		}
		sent := 0
		for i := 0; i < o.batch; i++ {
			if o.count > 0 && submitted >= o.count {
				break
			}
			f, err := s.Next()
			if err != nil {
				if !errors.Is(err, txpath.ErrNoFrames) && !errors.Is(err, txpath.ErrRingFull) {
					die("next: %v", err)
				}
				break
			}
			// The frame holds the packet already (written before the run).
			if err := s.Commit(f, o.size, txpath.Options{}); err != nil {
				die("commit: %v", err)
			}
			submitted++
			sent++
		}
		if sent < o.batch {
			// A partial batch: submit it, kick, reap.
			if err := s.Flush(); err != nil {
				die("flush: %v", err)
			}
		}
		if sent == 0 {
			if idle++; idle > idleSpins {
				time.Sleep(20 * time.Microsecond)
			}
		} else {
			idle = 0
		}
	}
	// Let the last frames complete (bounded).
	dl := time.Now().Add(drainTime)
	for s.InFlight() > 0 && time.Now().Before(dl) {
		if err := s.Flush(); err != nil {
			die("flush: %v", err)
		}
	}
	end := time.Now()
	allocs := mallocs() - m0
	st := s.Stats()
	xs, err := sock.Stats()
	if err != nil {
		die("stats: %v", err)
	}
	d := end.Sub(start)
	r := mpps(st.Completed, d)
	fmt.Printf(`{"mode":"txonly","impl":"xdpkit","frames":%d,"seconds":%.6f,"mpps":%.4f,"gbps":%.4f,`+
		`"iface":%q,"queue":%d,"size":%d,"batch":%d,"ring":%d,"frame_size":%d,"submitted":%d,`+
		`"kicks":%d,"kicks_again":%d,"tx_budget":%d,"no_tx_budget":%v,"tx_invalid_descs":%d,"tx_ring_empty_descs":%d,"mallocs":%d,"strategy":"sender"}`+"\n",
		st.Completed, d.Seconds(), r, r*float64(o.size)*8/1e3, o.ifname, o.queue, o.size, o.batch, o.ring,
		o.frameSize, submitted, st.Kicks, st.KicksAgain, sock.Features().TXBudget, sock.Features().NoTXBudget, xs.TXInvalidDescs, xs.TXRingEmptyDescs, allocs)
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "xdpkitbench: sender close: %v\n", err)
	}
	if err := sock.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "xdpkitbench: socket close: %v\n", err)
	}
}

// runTXRing is txonly on xsk's rings directly, with xdpbench's default
// strategy: keep the TX ring as full as the free frames allow, kick only
// when the kernel asks (KickTX), reap every completion there is once per
// loop.
func runTXRing(sock *xsk.Socket) {
	free := make([]uint64, o.frames)
	for i := range free {
		free[i] = uint64(i * o.frameSize)
	}
	descs := make([]xsk.Desc, o.batch)
	comp := make([]uint64, o.ring)
	tx := sock.TX()
	ready()

	time.Sleep(time.Microsecond)
	m0 := mallocs()
	start := time.Now()
	deadline := start.Add(time.Duration(o.duration) * time.Second)
	var submitted, completed uint64
	idle := 0
	for !stop.Load() && time.Now().Before(deadline) {
		done := sock.Completion().Consume(comp)
		free = append(free, comp[:done]...)
		completed += uint64(done)
		if o.count > 0 && completed >= o.count {
			break
		}
		want := min(o.batch, len(free))
		if o.count > 0 && o.count-submitted < uint64(want) {
			want = int(o.count - submitted)
		}
		for i := 0; i < want; i++ {
			descs[i] = xsk.Desc{Addr: free[len(free)-1-i], Len: uint32(o.size)}
		}
		n := tx.Produce(descs[:want])
		free = free[:len(free)-n]
		submitted += uint64(n)
		if tx.Pending() > 0 {
			if err := sock.KickTX(); err != nil {
				die("kick: %v", err)
			}
		}
		if n == 0 && done == 0 {
			if idle++; idle > idleSpins {
				time.Sleep(20 * time.Microsecond)
			}
		} else {
			idle = 0
		}
	}
	dl := time.Now().Add(drainTime)
	for completed < submitted && time.Now().Before(dl) {
		done := sock.Completion().Consume(comp)
		free = append(free, comp[:done]...)
		completed += uint64(done)
		if done == 0 && tx.Pending() > 0 {
			if err := sock.KickTX(); err != nil {
				die("kick: %v", err)
			}
		}
	}
	end := time.Now()
	allocs := mallocs() - m0
	xs, err := sock.Stats()
	if err != nil {
		die("stats: %v", err)
	}
	c := sock.Counters()
	d := end.Sub(start)
	r := mpps(completed, d)
	fmt.Printf(`{"mode":"txonly","impl":"xdpkit","frames":%d,"seconds":%.6f,"mpps":%.4f,"gbps":%.4f,`+
		`"iface":%q,"queue":%d,"size":%d,"batch":%d,"ring":%d,"frame_size":%d,"submitted":%d,`+
		`"kicks":%d,"tx_budget":%d,"no_tx_budget":%v,"tx_invalid_descs":%d,"tx_ring_empty_descs":%d,"mallocs":%d,"strategy":"ring"}`+"\n",
		completed, d.Seconds(), r, r*float64(o.size)*8/1e3, o.ifname, o.queue, o.size, o.batch, o.ring,
		o.frameSize, submitted, c.KicksTX, sock.Features().TXBudget, sock.Features().NoTXBudget, xs.TXInvalidDescs, xs.TXRingEmptyDescs, allocs)
	if err := sock.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "xdpkitbench: socket close: %v\n", err)
	}
}

// receiver is the rxdrop and fwd handler.
type receiver struct {
	frames      uint64
	seen        uint64 // frames at the end of the last round
	first, last int64  // ns since start of the first packet and of the end of the last round with packets
	start       time.Time
	cancel      context.CancelFunc
	m0, m1      uint64 // mallocs at the first packet and at the last multiple of allocEvery
	mFrames     uint64 // frames at m1 (0: the run had fewer than allocEvery)

	// fwd
	out       *xsk.Socket
	u         *umem.UMEM
	p         *rxpath.Poller // completed frames go back through its Recycle while Run runs
	hdr       [12]byte       // destination and source MAC of forwarded frames
	pend      []xsk.Desc
	comp      []uint64
	inflight  int
	completed uint64
	txFull    uint64
	batch     int
	kicks     uint64
	l3        bool
	fr        pkt.Frame
	notRouted uint64
	// data[i] is the packet of pend[i] while it waits for rewrite (the
	// frames are kept: they stay valid); drop collects the frames of
	// packets not routed, for one PutBatch.
	data  [][]byte
	drop  []uint64
	touch byte

	lat *latHist // rxdrop --latency
}

func (r *receiver) Receive(p *rxpath.Packet) {
	r.frames++
	switch {
	case r.frames == 1:
		r.first = int64(time.Since(r.start))
		// Count allocations from the first packet to the last multiple
		// of allocEvery: Run's set-up and shutdown are not the loop.
		r.m0 = mallocs()
	case r.frames%allocEvery == 0:
		r.m1, r.mFrames = mallocs(), r.frames
	}
	if r.out != nil {
		if len(p.Data) >= ethLen && len(p.Segments) == 1 {
			// Kept as it is: rewrite reads and rewrites the batch.
			r.pend = p.Keep(r.pend)
			r.data = append(r.data, p.Data)
		}
		if len(r.pend) >= r.batch {
			r.flush()
		}
	}
	if r.lat != nil {
		r.lat.observe(p.Data)
	}
	if o.count > 0 && r.frames >= o.count {
		r.cancel()
	}
}

// EndRound runs at the end of every poll round (rxpath.RoundEnder): the
// forwarder puts what it kept on the TX ring, and the time of the last
// packet is taken (once per round, as xdpbench takes it once per batch).
func (r *receiver) EndRound() {
	if r.out != nil && len(r.pend) > 0 {
		r.flush()
	}
	if r.lat != nil {
		r.lat.endRound()
	}
	if r.frames != r.seen {
		r.seen = r.frames
		r.last = int64(time.Since(r.start))
	}
}

var _ rxpath.RoundEnder = (*receiver)(nil)

// reap gives completed frames back to the poller for its Fill ring, in
// the order they completed (rxpath.Poller.Recycle), or to the UMEM
// allocator once Run has returned.
func (r *receiver) reap() {
	for {
		n := r.out.Completion().Consume(r.comp)
		if n == 0 {
			return
		}
		r.inflight -= n
		r.completed += uint64(n)
		err := r.p.Recycle(r.u, r.comp[:n])
		if errors.Is(err, rxpath.ErrNotRunning) {
			err = r.u.PutBatch(r.comp[:n])
		}
		if err != nil {
			die("completion: %v", err)
		}
		if n < len(r.comp) {
			return
		}
	}
}

// rewrite does the per-packet work on the kept batch: --l3 does
// xdpfwd's (pkt.Parse, pkt.DecTTL, then the MACs; the next hop given),
// plain fwd the MAC rewrite. The packets were written by the CPU that ran
// the kernel's RX copy: --l3 first reads a byte of each one's first cache
// line, loads independent of each other whose misses overlap, instead of
// one miss after the other inside the parser.
func (r *receiver) rewrite() {
	if !r.l3 {
		for _, b := range r.data {
			copy(b[:12], r.hdr[:])
		}
		r.data = r.data[:0]
		return
	}
	var t byte
	for _, b := range r.data {
		t += b[12]
	}
	r.touch = t
	j := 0
	for i, b := range r.data {
		if pkt.Parse(b, &r.fr) != nil || !pkt.DecTTL(b, &r.fr) {
			r.notRouted++
			r.drop = append(r.drop, r.pend[i].Addr)
			continue
		}
		copy(b[:12], r.hdr[:])
		r.pend[j] = r.pend[i]
		j++
	}
	r.pend, r.data = r.pend[:j], r.data[:0]
	if len(r.drop) > 0 {
		if err := r.u.PutBatch(r.drop); err != nil {
			die("drop: %v", err)
		}
		r.drop = r.drop[:0]
	}
}

// flush rewrites the kept frames, puts them on the out socket's TX ring
// and kicks it.
func (r *receiver) flush() {
	r.rewrite()
	r.reap()
	for tries := 0; len(r.pend) > 0; tries++ {
		n := r.out.TX().Produce(r.pend)
		r.inflight += n
		r.pend = r.pend[:copy(r.pend, r.pend[n:])]
		r.kick()
		if len(r.pend) == 0 {
			break
		}
		r.reap()
		if tries == 64 {
			// The TX ring stays full: drop the rest, as a NIC would.
			r.txFull += uint64(len(r.pend))
			for _, d := range r.pend {
				if err := r.u.Put(d.Addr); err != nil {
					die("drop: %v", err)
				}
			}
			r.pend = r.pend[:0]
		}
	}
}

// kick wakes the kernel while the TX ring holds descriptors it has not
// taken: copy mode sends at most 32 frames per sendto, so one kick per
// batch of 64 would leave frames on the ring, and their frames out of the
// Fill ring. Bounded, with completions reaped in between.
func (r *receiver) kick() {
	tx := r.out.TX()
	for i, limit := 0, tx.Pending()/16+2; i < limit && tx.Pending() > 0; i++ {
		r.kicks++
		if err := r.out.KickTX(); err != nil {
			die("kick: %v", err)
		}
		r.reap()
	}
}

func runRX(fwd bool) {
	u := newUMEM()
	sc := socketConfig(false, true)
	if !fwd && o.busyPoll > 0 {
		sc.PreferBusyPoll, sc.BusyPollTimeout, sc.BusyPollBudget = true, 20*time.Microsecond, o.busyPoll
	}
	hp := fwd && hairpin()
	if hp {
		// One socket with both rings: a received frame goes from its RX
		// ring to its own TX ring, as xdpfwd's does on one interface.
		sc = socketConfig(false, false)
	}
	in, err := xsk.New(o.ifname, o.queue, u, sc)
	if err != nil {
		die("socket on %s queue %d: %v", o.ifname, o.queue, err)
	}
	r := &receiver{batch: o.batch, l3: o.l3}
	if fwd {
		r.out = in
		if !hp {
			r.out, err = xsk.New(o.outIfname, o.outQueue, u, socketConfig(true, false))
			if err != nil {
				die("socket on %s queue %d (shared UMEM): %v", o.outIfname, o.outQueue, err)
			}
		}
		r.u = u
		copy(r.hdr[:6], o.dstMAC)
		copy(r.hdr[6:], macOf(o.outIfname))
		r.pend = make([]xsk.Desc, 0, 2*o.batch)
		r.data = make([][]byte, 0, 2*o.batch)
		r.drop = make([]uint64, 0, 2*o.batch)
		r.comp = make([]uint64, o.ring)
	}
	pc := &rxpath.Config{Weight: o.batch, CopyThreshold: -1, FillBatch: o.batch, Coalesce: o.coalesce, MaxDelay: o.maxDelay, RuntimeSleep: o.runtimeSleep}
	if !fwd {
		pc.IdleRounds, pc.BusyPoll = o.idleRounds, o.busyPoll > 0
	} else {
		pc.FillFrames = o.fillFrames
	}
	pc.Prefetch = o.prefetch
	// A P of the Poller's own, as package mq keeps one per queue: while
	// packets flow it sleeps in ppoll holding it, which it does only
	// while a P is left for the rest of the process (rxpath's flow
	// sleep). Pinned to one CPU (taskset, as make bench runs it, or
	// --cpu), Go starts with one P; the other stays idle while packets
	// flow, as the handler readies no goroutine.
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	spareThreads(2)
	p, err := rxpath.New(pc, in)
	if err != nil {
		die("poller: %v", err)
	}
	r.p = p
	prog := attach(in)
	restoreNAPI := func() {}
	if !fwd && o.napiDefer >= 0 {
		restoreNAPI = setNAPI(in.Ifname())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.duration)*time.Second)
	defer cancel()
	r.cancel = cancel
	// A signal ends Run. The goroutine sleeps until then: one that
	// looked every few milliseconds would wake the runtime (and its
	// sysmon thread) beside the poller's own wake-ups, and its CPU would
	// be counted as the receiver's.
	var bySignal atomic.Bool
	go func() {
		select {
		case <-stopped:
			bySignal.Store(true)
		case <-ctx.Done():
		}
		cancel()
	}()
	if o.latency && !fwd {
		r.lat = &latHist{taiOffset: taiOffset(), batch: o.batch}
	}
	ready()
	r.start = time.Now()
	cpu0 := processCPU()
	err = p.Run(ctx, r)
	cpu := processCPU() - cpu0
	if fwd {
		r.flush()
		dl := time.Now().Add(drainTime)
		for r.inflight > 0 && time.Now().Before(dl) {
			r.kick()
			r.reap()
		}
	}
	wall := time.Since(r.start)
	var allocs, allocFrames uint64 // allocFrames 0: not counted
	if r.mFrames > 0 {
		allocs, allocFrames = r.m1-r.m0, r.mFrames-1
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		die("poller: %v", err)
	}
	st, err := in.Stats()
	if err != nil {
		die("stats: %v", err)
	}
	kicks := in.Counters().KicksRX + in.Counters().KicksTX
	kicksAgain := in.Counters().KicksAgain
	if fwd && !hp {
		kicks += r.out.Counters().KicksTX
		kicksAgain += r.out.Counters().KicksAgain
	}
	seconds := time.Duration(r.last - r.first)
	// What ended the run: a signal, the frame count or the duration.
	ended := "duration"
	switch {
	case bySignal.Load():
		ended = "signal"
	case o.count > 0 && r.frames >= o.count:
		ended = "count"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"mode":%q,"impl":"xdpkit","frames":%d,"seconds":%.6f,"mpps":%.4f,"rx_dropped":%d,"rx_ring_full":%d,`+
		`"fill_empty":%d,"rx_invalid_descs":%d,"wall_seconds":%.6f,"iface":%q,"queue":%d,"batch":%d,"ring":%d,`+
		`"frame_size":%d,"kicks":%d,"kicks_again":%d,"mallocs":%d,"mallocs_frames":%d,"ended":%q`,
		o.mode, r.frames, seconds.Seconds(), mpps(r.frames, seconds), st.RXDropped, st.RXRingFull,
		st.RXFillRingEmptyDesc, st.RXInvalidDescs, wall.Seconds(), o.ifname, o.queue, o.batch, o.ring,
		o.frameSize, kicks, kicksAgain, allocs, allocFrames, ended)
	if ps, err := p.Stats(); err == nil {
		// How the poller's rounds went: rounds that used their whole
		// budget mean the RX ring held a backlog.
		fmt.Fprintf(&b, `,"rounds":%d,"full_rounds":%d,"sleeps":%d`, ps.Rounds, ps.FullRounds, ps.Sleeps)
	}
	if fwd {
		ps, _ := p.Stats() // rounds, full_rounds and sleeps are above
		fill := o.fillFrames
		if fill == 0 {
			// rxpath's default: the ring's size, but no more than half
			// of a UMEM its socket also sends from (a hairpin's).
			share := o.frames
			if hp {
				share /= 2
			}
			fill = min(o.ring, share)
		}
		fmt.Fprintf(&b, `,"out_iface":%q,"tx_budget":%d,"no_tx_budget":%v,"tx_completed":%d,"tx_full":%d,"l3":%v,"not_routed":%d,"syscalls":%d,"wakeups":%d,"naps":%d,"naps_empty":%d,"nap_time_ns":%d,"spins":%d,"sleep_cpu_ns":%d,"spin_limit_ns":%d,"fill_frames":%d,"hairpin":%v`,
			o.outIfname, r.out.Features().TXBudget, r.out.Features().NoTXBudget, r.completed, r.txFull, o.l3, r.notRouted, ps.Syscalls, ps.Wakeups, ps.Naps, ps.NapsEmpty, ps.NapTime.Nanoseconds(), ps.Spins, ps.SleepCPU.Nanoseconds(), ps.SpinLimit.Nanoseconds(), fill, hp)
	} else {
		ps, _ := p.Stats() // rounds, full_rounds and sleeps are above
		fmt.Fprintf(&b, `,"spins":%d,"preempted":%d,"naps":%d,"naps_empty":%d,"nap_time_ns":%d,"nap_cost_ns":%d,"wakeups":%d,"syscalls":%d,"sleep_cost_ns":%d,"expected_gap_ns":%d,"sleep_cpu_ns":%d,"spin_limit_ns":%d`,
			ps.Spins, ps.Preempted, ps.Naps, ps.NapsEmpty, ps.NapTime.Nanoseconds(), ps.NapCost.Nanoseconds(), ps.Wakeups, ps.Syscalls, ps.SleepCost.Nanoseconds(), ps.ExpectedGap.Nanoseconds(), ps.SleepCPU.Nanoseconds(), ps.SpinLimit.Nanoseconds())
	}
	if r.lat != nil {
		r.lat.json(&b, cpu)
	}
	b.WriteString("}\n")
	os.Stdout.WriteString(b.String())

	restoreNAPI() // while the NAPIs exist: detaching XDP removes veth's
	if err := prog.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "xdpkitbench: detach: %v\n", err)
	}
	if fwd && !hp {
		if err := r.out.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "xdpkitbench: close: %v\n", err)
		}
	}
	if err := in.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "xdpkitbench: close: %v\n", err)
	}
	if err := p.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "xdpkitbench: close: %v\n", err)
	}
}

// setNAPI applies --napi-defer and --napi-gro-flush to ifname's NAPI
// instances (xsk.SetNAPIDeferral; veth has them once an XDP program is
// attached) and returns what puts the old values back.
func setNAPI(ifname string) (restore func()) {
	c, err := xsk.SetNAPIDeferral(ifname, xsk.NAPIDeferral{DeferHardIRQs: uint32(o.napiDefer), GROFlushTimeout: o.napiFlush})
	if err != nil {
		die("%v", err)
	}
	restore = func() {
		if err := c.Restore(); err != nil {
			fmt.Fprintf(os.Stderr, "xdpkitbench: %v\n", err)
		}
	}
	undo = append(undo, restore) // die restores too; a second Restore does nothing
	fmt.Fprintf(os.Stderr, "xdpkitbench: NAPI deferral of %s: defer_hard_irqs %d, gro_flush_timeout %v, via %s\n", ifname, o.napiDefer, o.napiFlush, c.Via())
	return restore
}
