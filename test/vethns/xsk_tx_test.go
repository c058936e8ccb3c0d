package vethns_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
	"golang.org/x/sys/unix"
)

// txFrames sends n UDP datagrams from sock to dst, keeping at most window
// of them unacknowledged (acked counts what the receiver got), and reaps
// every completion. It returns when all n were sent and completed, or
// fails after the deadline.
func txFrames(sock *xsk.Socket, n int, window int64, acked *atomic.Int64, build func(b []byte, seq int) int) error {
	u := sock.UMEM()
	tx, comp := sock.TX(), sock.Completion()
	descs := make([]xsk.Desc, 64)
	addrs := make([]uint64, 64)
	deadline := time.Now().Add(30 * time.Second)
	sent, completed := 0, 0
	for completed < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("sent %d, completed %d of %d before the deadline (%s)", sent, completed, n, u.Accounting())
		}
		if c := comp.Consume(addrs); c > 0 {
			if err := u.PutBatch(addrs[:c]); err != nil {
				return err
			}
			completed += c
		}
		batch := min(64, n-sent)
		if window > 0 {
			batch = min(batch, int(window-(int64(sent)-acked.Load())))
		}
		if batch <= 0 {
			if err := sock.KickTX(); err != nil {
				return err
			}
			time.Sleep(50 * time.Microsecond)
			continue
		}
		got := u.GetBatch(addrs[:batch])
		for i := 0; i < got; i++ {
			l := build(u.Frame(addrs[i]), sent+i)
			descs[i] = xsk.Desc{Addr: addrs[i], Len: uint32(l)}
		}
		p := tx.Produce(descs[:got])
		if p < got {
			if err := u.PutBatch(addrs[p:got]); err != nil {
				return err
			}
		}
		sent += p
		if err := sock.KickTX(); err != nil {
			return err
		}
	}
	return nil
}

func TestXSKTX(t *testing.T) {
	vethns.Require(t)
	for _, family := range []string{"ipv4", "ipv6"} {
		t.Run(family, func(t *testing.T) {
			a, b := vethns.NewNS(t), vethns.NewNS(t)
			p := vethns.NewPair(t, a, b, nil)
			runTX(t, a, b, p, family, false)
		})
	}
}

// runTX sends 20,000 datagrams of varying sizes from an AF_XDP socket
// without RX ring on p.A to a kernel UDP socket on p.B, which must receive
// each in order and byte-exact, and checks that every frame was completed
// and is back in the UMEM. zc is whether the socket must bind in
// zero-copy mode (ModeAuto decides): its Fill ring is then stocked, and
// the frames it lent stay there until Close.
func runTX(t *testing.T, a, b *vethns.NS, p *vethns.Pair, family string, zc bool) {
	src, dst := p.A.AddrPort4(40000), p.B.AddrPort4(9000)
	if family == "ipv6" {
		src, dst = p.A.AddrPort6(40000), p.B.AddrPort6(9000)
	}
	conn, err := b.ListenUDP(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := vethns.ForceReadBuffer(conn, 8<<20); err != nil {
		t.Fatal(err)
	}

	const n = 20000
	var acked atomic.Int64
	recvErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		want := make([]byte, 2048)
		for i := 0; i < n; i++ {
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			m, err := conn.Read(buf)
			if err != nil {
				recvErr <- fmt.Errorf("after %d datagrams: %w", i, err)
				return
			}
			seq := int(binary.BigEndian.Uint32(buf))
			if seq != i {
				recvErr <- fmt.Errorf("datagram %d has sequence %d", i, seq)
				return
			}
			w := payload(want, seq)
			if !bytes.Equal(buf[:m], w) {
				recvErr <- fmt.Errorf("datagram %d: payload differs (%d bytes, want %d)", i, m, len(w))
				return
			}
			acked.Add(1)
		}
		recvErr <- nil
	}()

	var acct umem.Accounting
	var stocked int
	err = a.Do(func() error {
		u, err := umem.New(&umem.Config{FrameCount: 1024})
		if err != nil {
			return err
		}
		defer u.Close()
		sock, err := xsk.New(p.A.Name, 0, u, &xsk.Config{NoRX: true})
		if err != nil {
			return err
		}
		defer sock.Close()
		if sock.ZeroCopy() != zc {
			return fmt.Errorf("bound with zero-copy %v, want %v", sock.ZeroCopy(), zc)
		}
		stocked = sock.Stocked()
		if zc != (stocked > 0) {
			return fmt.Errorf("zero-copy %v, but %d frames stocked on the Fill ring", zc, stocked)
		}
		buf := make([]byte, 2048)
		restore, err := pinThread()
		if err != nil {
			return err
		}
		defer restore()
		// At most p.InFlight(): fewer than the receiving end
		// queues (veth's backlog, and 256 when XDP runs there).
		err = txFrames(sock, n, p.InFlight(), &acked, func(f []byte, seq int) int {
			return udpFrame(f, p.A.MAC, p.B.MAC, src, dst, payload(buf, seq))
		})
		if err != nil {
			return err
		}
		st, err := sock.Stats()
		if err != nil {
			return err
		}
		if st.TXInvalidDescs != 0 {
			return fmt.Errorf("tx_invalid_descs %d", st.TXInvalidDescs)
		}
		acct = u.Accounting()
		// Close gives back the frames lent to the Fill ring.
		if err := sock.Close(); err != nil {
			return err
		}
		if a := u.Accounting(); a.Free != a.Total {
			return fmt.Errorf("after Close: %s", a)
		}
		return nil
	})
	logCounters := func() {
		c, _ := b.Counters()
		for k, v := range c {
			if v != 0 && (k[:3] == "Udp" || k[:3] == "Ip6" || k[:2] == "Ip") {
				t.Logf("%s %d", k, v)
			}
		}
	}
	if err != nil {
		logCounters()
		select {
		case rerr := <-recvErr:
			t.Logf("receiver: %v", rerr)
		default:
		}
		t.Fatal(err)
	}
	if err := <-recvErr; err != nil {
		logCounters()
		t.Fatal(err)
	}
	// Every sent frame came back; the stocked ones are on the Fill ring.
	if acct.Free != acct.Total-stocked || acct.Fill != stocked {
		t.Fatalf("frames leaked: %s (%d stocked)", acct, stocked)
	}
}

// pinThread binds the calling thread, locked to its goroutine, to one
// CPU of those it may run on, and returns what gives it back its CPU
// set. A copy-mode AF_XDP socket transmits in the sendto of the thread
// that kicks it, and veth hands a frame for a peer without XDP to the
// backlog of the sending CPU (netif_rx): frames sent from two CPUs can
// arrive out of order, which no kernel promises (emulated guests, whose
// threads move between CPUs often, showed it). From one CPU they arrive
// in order.
func pinThread() (func(), error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	var one unix.CPUSet
	for cpu := 0; cpu < len(all)*64; cpu++ {
		if all.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return nil, os.NewSyscallError("sched_setaffinity", err)
	}
	return func() { unix.SchedSetaffinity(0, &all) }, nil
}

// payload fills b with a datagram for seq: the sequence number, then a
// pattern that depends on it; its size varies from 18 to 1400 bytes.
func payload(b []byte, seq int) []byte {
	n := 18 + (seq*37)%1383
	b = b[:n]
	binary.BigEndian.PutUint32(b, uint32(seq))
	for i := 4; i < n; i++ {
		b[i] = byte(seq + i*7)
	}
	return b
}

var _ = net.IPv4len
