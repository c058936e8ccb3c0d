package promxdp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

func TestMain(m *testing.M) {
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

// scrape gathers reg and returns every sample as name{label="v",...}
// (labels sorted by name) -> value.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = value(mf.GetType(), m)
		}
	}
	return out
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	if t == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestCollector registers a Collector in a fresh registry over a socket
// on a veth end that receives datagrams through a poller and sends
// datagrams through a sender, and checks the scraped values against the
// traffic and against the sources read directly: the poller's packets
// per socket are the datagrams received, the sender's packets and bytes
// those sent, the socket's XDP_STATISTICS and kick counts what the socket
// says, the UMEM's frames add up to its size. A closed socket leaves the
// scrape, and the metrics pass client_golang's lint.
func TestCollector(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	const port, recvN, sendN, payload = 9000, 100, 50, 64

	var (
		u    *umem.UMEM
		sock *xsk.Socket
		prog *xsk.Program
	)
	err := a.Do(func() error {
		var err error
		if u, err = umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096}); err != nil {
			return err
		}
		if sock, err = xsk.New(p.A.Name, 0, u, nil); err != nil {
			return err
		}
		filter := &xsk.Filter{IPv4UDP: true, DstPorts: []uint16{port}}
		if prog, err = xsk.AttachProgram(p.A.Name, &xsk.ProgramConfig{Filter: filter}); err != nil {
			return err
		}
		return prog.Register(sock)
	})
	defer func() {
		if prog != nil {
			prog.Close()
		}
		if sock != nil {
			sock.Close()
		}
		if u != nil {
			u.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	s, err := txpath.New(sock, &txpath.Config{Policy: txpath.Plain})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	poller, err := rxpath.New(nil, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer poller.Close()

	// The sender's counters, published by the goroutine that sends.
	var (
		mu  sync.Mutex
		pub txpath.Stats
	)
	c := New()
	c.AddSocket(sock)
	c.AddPoller("rx", poller, sock)
	c.AddSender(s, sock, func() txpath.Stats { mu.Lock(); defer mu.Unlock(); return pub })
	c.AddUMEM("main", u)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}

	h := &countHandler{ready: make(chan struct{})}
	got := &h.got
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- poller.Run(ctx, h)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("poller: %v", err)
			}
		}
	}
	defer stop()

	// Receive, once the poller's first round has put frames on the Fill
	// ring (before that a datagram finds it empty and is dropped): one
	// datagram in flight at a time (no veth ring drops).
	select {
	case <-h.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("the poller did not end its first round in 5 s")
	}
	conn, err := b.DialUDP(netip.AddrPort{}, p.A.AddrPort4(port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := 0; i < recvN; i++ {
		if _, err := conn.Write(make([]byte, payload)); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); got.Load() <= int64(i); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("datagram %d did not reach the poller in 5 s", i)
			}
		}
	}

	// Send: to a kernel socket on B.
	lis, err := b.ListenUDP(p.B.AddrPort4(port))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	flow, err := txpath.NewUDPFlow(sock.HardwareAddr(), p.B.MAC, p.A.AddrPort4(port), p.B.AddrPort4(port), nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for i := 0; i < sendN; i++ {
		if err := s.SendUDP(flow, txpath.Options{}, make([]byte, payload)); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		lis.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := lis.Read(buf); err != nil {
			t.Fatalf("datagram %d sent: %v", i, err)
		}
		mu.Lock()
		pub = s.Stats()
		mu.Unlock()
	}

	// The poller publishes at the end of a round: stop it, then every
	// source is still.
	stop()
	m := scrape(t, reg)
	sl := fmt.Sprintf("interface=%q,queue=\"0\"", p.A.Name)
	want := map[string]float64{
		fmt.Sprintf(`xdpkit_poller_socket_packets_total{interface=%q,poller="rx",queue="0"}`, p.A.Name): recvN,
		`xdpkit_poller_packets_total{poller="rx"}`:                                                      recvN,
		`xdpkit_sender_packets_total{` + sl + `}`:                                                       sendN,
		`xdpkit_sender_bytes_total{` + sl + `}`:                                                         sendN * (14 + 20 + 8 + payload),
		`xdpkit_umem_frames_capacity{umem="main"}`:                                                      4096,
	}
	st, err := sock.Stats()
	if err != nil {
		t.Fatal(err)
	}
	kc := sock.Counters()
	for name, v := range map[string]uint64{
		"rx_dropped_total": st.RXDropped, "rx_invalid_descs_total": st.RXInvalidDescs,
		"tx_invalid_descs_total": st.TXInvalidDescs, "rx_ring_full_total": st.RXRingFull,
		"rx_fill_ring_empty_total": st.RXFillRingEmptyDesc, "tx_ring_empty_total": st.TXRingEmptyDescs,
		"tx_kicks_total": kc.KicksTX, "rx_kicks_total": kc.KicksRX, "kicks_again_total": kc.KicksAgain,
	} {
		want["xdpkit_socket_"+name+"{"+sl+"}"] = float64(v)
	}
	for k, v := range want {
		if g, ok := m[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if v := m[`xdpkit_sender_completed_total{`+sl+`}`]; v > sendN {
		t.Errorf("sender completed %v of %d sent", v, sendN)
	}
	var sum float64
	for _, state := range []string{"free", "held", "fill", "tx"} {
		k := fmt.Sprintf("xdpkit_umem_frames{state=%q,umem=\"main\"}", state)
		v, ok := m[k]
		if !ok {
			t.Errorf("%s missing", k)
		}
		sum += v
	}
	if sum != 4096 {
		t.Errorf("UMEM frames by state add up to %v, want 4096", sum)
	}
	if t.Failed() {
		t.Logf("scrape: %v", m)
	}

	// A closed socket leaves the scrape; the rest stays.
	sock.Close()
	n, err := testutil.GatherAndCount(reg, "xdpkit_socket_rx_dropped_total", "xdpkit_umem_frames_capacity")
	if err != nil || n != 1 {
		t.Errorf("after the socket's Close: %d series of rx_dropped and capacity (%v), want 1", n, err)
	}
}

// countHandler counts packets and closes ready at the end of the poller's
// first round (rxpath.RoundEnder), when the Fill ring has its frames.
type countHandler struct {
	got   atomic.Int64
	ready chan struct{}
	once  sync.Once
}

func (h *countHandler) Receive(*rxpath.Packet) { h.got.Add(1) }
func (h *countHandler) EndRound()              { h.once.Do(func() { close(h.ready) }) }
