package rxpath_test

import (
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/rxpath"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// frame64 writes a 64-byte Ethernet/IPv4/UDP frame (60 bytes + FCS) from
// the pair's B end to A's port.
func frame64(b []byte, p *vethns.Pair) int {
	copy(b[0:6], p.A.MAC)
	copy(b[6:12], p.B.MAC)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], 46)
	binary.BigEndian.PutUint32(ip[4:], 0x40000000)
	ip[8], ip[9], ip[10], ip[11] = 64, 17, 0, 0
	s4, d4 := p.B.IPv4.Addr().As4(), p.A.IPv4.Addr().As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip, 0))
	u := b[34:60]
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], port)
	binary.BigEndian.PutUint16(u[4:], 26)
	binary.BigEndian.PutUint16(u[6:], 0) // no UDP checksum (IPv4)
	clear(u[8:])
	return 60
}

// threadCPU is the calling thread's CPU time (/proc/thread-self/schedstat).
func threadCPU() time.Duration {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// generate sends 64-byte frames from an AF_XDP socket on the B end until
// stop is set, count frames were sent or the time limit passes. It runs on
// its own locked thread and returns that thread's CPU time.
func generate(b *bed, stop *atomic.Bool, count int64, limit time.Duration, sent *atomic.Int64) (time.Duration, error) {
	var cpu time.Duration
	err := b.b.Do(func() error {
		u, err := umem.New(&umem.Config{FrameCount: 4096, FrameSize: 2048})
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(b.pair.B.Name, 0, u, &xsk.Config{NoRX: true, MaxTXBudget: 256})
		if err != nil {
			return err
		}
		defer s.Close()
		addrs := make([]uint64, 4096)
		n := u.GetBatch(addrs)
		free := addrs[:n]
		for _, a := range free {
			frame64(u.Frame(a), b.pair)
		}
		descs := make([]xsk.Desc, 256)
		comp := make([]uint64, 256)
		cpu0 := threadCPU()
		deadline := time.Now().Add(limit)
		for i := 0; !stop.Load() && sent.Load() < count; i++ {
			if i%64 == 0 && time.Now().After(deadline) {
				break
			}
			k := min(len(descs), len(free))
			for j := range k {
				descs[j] = xsk.Desc{Addr: free[len(free)-1-j], Len: 60}
			}
			p := s.TX().Produce(descs[:k])
			free = free[:len(free)-p]
			sent.Add(int64(p))
			if err := s.KickTX(); err != nil {
				return err
			}
			c := s.Completion().Consume(comp)
			free = append(free, comp[:c]...)
		}
		// Drain: wait for what is on the ring, then give every frame back.
		for t := time.Now(); len(free) < n && time.Since(t) < time.Second; {
			_ = s.KickTX()
			c := s.Completion().Consume(comp)
			free = append(free, comp[:c]...)
		}
		cpu = threadCPU() - cpu0
		return u.PutBatch(free)
	})
	return cpu, err
}

type counter struct{ n atomic.Int64 }

func (c *counter) Receive(p *rxpath.Packet) { c.n.Add(1) }

// BenchmarkRX receives 64-byte frames sent by an AF_XDP generator in the
// peer namespace over veth (native XDP, copy mode). Reported: received
// Mpps, frames dropped per received frame, the poller's system calls and
// sleeps per frame, and the receiver's CPU (process CPU minus the
// generator thread's, which also runs veth's XDP and the AF_XDP copy).
func BenchmarkRX(b *testing.B) {
	for _, mode := range []struct {
		name string
		cfg  rxpath.Config
	}{{"sleep", rxpath.Config{}}, {"spin", rxpath.Config{Spin: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			bd := newBed(b, bedConfig{rx: mode.cfg})
			h := &counter{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- bd.poller.Run(ctx, h) }()
			for t := time.Now(); time.Since(t) < 5*time.Second; time.Sleep(time.Millisecond) {
				if st, _ := bd.poller.Stats(); st.Rounds > 0 {
					break
				}
			}
			st0, _ := bd.poller.Stats()
			var stop atomic.Bool
			var sent atomic.Int64
			gen := make(chan error, 1)
			var genCPU time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			c0, t0 := cpuTime(), time.Now()
			go func() {
				var err error
				genCPU, err = generate(bd, &stop, int64(b.N)*4+100000, 20*time.Second, &sent)
				gen <- err
			}()
			for h.n.Load() < int64(b.N) && time.Since(t0) < 20*time.Second {
				runtime.Gosched()
				time.Sleep(100 * time.Microsecond)
			}
			b.StopTimer()
			elapsed, c1 := time.Since(t0), cpuTime()
			stop.Store(true)
			gerr := <-gen
			cancel()
			<-done
			if gerr != nil {
				b.Fatal(gerr)
			}
			st, _ := bd.poller.Stats()
			got := float64(h.n.Load())
			if got == 0 {
				b.Fatal("nothing received")
			}
			x := st.Sockets[0].XDP
			b.ReportMetric(got/elapsed.Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(x.RXDropped+x.RXRingFull)/got, "drops/frame")
			b.ReportMetric(float64(st.Syscalls-st0.Syscalls)/got, "syscalls/frame")
			b.ReportMetric(float64(st.Sleeps-st0.Sleeps)/got, "sleeps/frame")
			b.ReportMetric(float64(c1-c0-genCPU)/float64(elapsed), "rxCPU")
			b.ReportMetric(float64(genCPU)/float64(elapsed), "genCPU")
			b.Logf("N %d: received %.0f of %d sent in %v; %s; XDP %+v", b.N, got, sent.Load(), elapsed, &st, x)
		})
	}
}
