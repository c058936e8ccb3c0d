package vethns_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// rxState describes, for a failure message, where a receive test's frames
// and datagrams are: the RX ring, the Fill ring (what the kernel has not
// taken yet, and what the test still holds for it), the socket's and the
// UMEM's counts, and both ends' device counters.
func rxState(sock *xsk.Socket, fill *filler, u *umem.UMEM, p *vethns.Pair) string {
	var b strings.Builder
	fr := sock.Fill()
	fmt.Fprintf(&b, "RX ring %d waiting; Fill ring %d of %d not taken by the kernel (free %d, need_wakeup %v), %d frames waiting for room",
		sock.RX().Len(), fr.Len(), fr.Size(), fr.Free(), fr.NeedWakeup(), len(fill.pending))
	if st, err := sock.Stats(); err == nil {
		fmt.Fprintf(&b, "; socket stats: rx_dropped %d, rx_ring_full %d, rx_fill_ring_empty_descs %d, rx_invalid_descs %d",
			st.RXDropped, st.RXRingFull, st.RXFillRingEmptyDesc, st.RXInvalidDescs)
	} else {
		fmt.Fprintf(&b, "; socket stats: %v", err)
	}
	c := sock.Counters()
	fmt.Fprintf(&b, "; %d recvfrom kicks (%d to try again); UMEM %s", c.KicksRX, c.KicksAgain, u.Accounting())
	for _, l := range []*vethns.Link{p.A, p.B} {
		fmt.Fprintf(&b, "; %s", linkState(l))
	}
	return b.String()
}

// linkState gives l's device counters and, where the driver has them, its
// receive and transmit queue counters (ethtool -S): rx/tx packets and
// drops, and virtio_net's per-queue XDP and kick counts.
func linkState(l *vethns.Link) string {
	var s string
	err := l.NS.Do(func() error {
		link, err := netlink.LinkByName(l.Name)
		if err != nil {
			return err
		}
		st := link.Attrs().Statistics
		s = fmt.Sprintf("%s in %s: rx %d packets, %d dropped, %d errors; tx %d packets, %d dropped, %d errors",
			l.Name, l.NS, st.RxPackets, st.RxDropped, st.RxErrors, st.TxPackets, st.TxDropped, st.TxErrors)
		e, err := ethtool.NewEthtool()
		if err != nil {
			s += fmt.Sprintf(" (ethtool: %v)", err)
			return nil
		}
		defer e.Close()
		m, err := e.Stats(l.Name)
		if err != nil {
			s += fmt.Sprintf(" (ethtool -S: %v)", err)
			return nil
		}
		var keys []string
		for k, v := range m {
			// virtio_net names its queues' counters rx0_... and tx0_,
			// veth rx_queue_0_... and tx_queue_0_.
			if v != 0 && (strings.HasPrefix(k, "rx0_") || strings.HasPrefix(k, "tx0_") ||
				strings.HasPrefix(k, "rx_queue_0_") || strings.HasPrefix(k, "tx_queue_0_")) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, fmt.Sprintf("%s=%d", k, m[k]))
		}
		if len(kv) > 0 {
			s += " (" + strings.Join(kv, " ") + ")"
		}
		return nil
	})
	if err != nil {
		return fmt.Sprintf("%s: %v", l.Name, err)
	}
	return s
}

// probeStalled tells a path that lost datagrams from one that stopped: it
// sends one datagram from primePort after a receive test stalled and says
// what reached rx's socket within 5 s.
func probeStalled(b *vethns.NS, p *vethns.Pair, rx *rxSetup, fill *filler) string {
	conn, err := b.DialUDP(p.B.AddrPort4(primePort), p.A.AddrPort4(9000))
	if err != nil {
		return fmt.Sprintf("probe: %v", err)
	}
	defer conn.Close()
	// A device that stopped transmitting fills the socket's send buffer:
	// the write must not wait for it.
	if err := conn.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return fmt.Sprintf("probe: %v", err)
	}
	if _, err := conn.Write([]byte("probe")); err != nil {
		return fmt.Sprintf("probe: %v", err)
	}
	sock := rx.socks[0]
	descs := make([]xsk.Desc, 64)
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for probe := false; !probe; {
		k := sock.RX().Consume(descs)
		if k == 0 {
			if err := sock.KickRX(); err != nil {
				return fmt.Sprintf("probe: %v", err)
			}
			if err := sock.WaitRX(ctx); err != nil {
				break
			}
			continue
		}
		for _, d := range descs[:k] {
			f, _ := rx.u.Data(d.Addr, d.Len)
			sport, pl, ok := udpPayload(f)
			switch {
			case ok && sport == primePort:
				probe = true
				got = append(got, "the probe")
			case ok && len(pl) >= 4:
				got = append(got, fmt.Sprintf("datagram %d", binary.BigEndian.Uint32(pl)))
			default:
				got = append(got, fmt.Sprintf("a %d-byte frame", d.Len))
			}
			fill.give(d.Addr)
		}
	}
	if len(got) == 0 {
		return "a probe datagram sent after the stall did not arrive within 5 s either: the path is stopped"
	}
	return "a probe datagram sent after the stall: then arrived " + strings.Join(got, ", ")
}

// rxStall is what a receive test noted when a wait first saw nothing.
type rxStall struct {
	state string    // rxState then
	tx    uint64    // the sending device's transmitted packets then
	at    time.Time // when
}

func newRXStall(sock *xsk.Socket, fill *filler, u *umem.UMEM, p *vethns.Pair) *rxStall {
	s := &rxStall{state: rxState(sock, fill, u, p), at: time.Now()}
	s.tx, _ = txPackets(p.B)
	return s
}

// linkStopped says why the link is to blame when the sending device
// transmitted nothing since the stall began and fewer packets since the
// run began (its counter then read tx0) than the sent datagrams written
// to it, and "" otherwise: a sender that stops because the receiver
// stopped taking datagrams (its window is full) has transmitted them all.
func (s *rxStall) linkStopped(p *vethns.Pair, waiting int64, tx0 uint64, sent int64) string {
	tx, err := txPackets(p.B)
	if err != nil || tx != s.tx || waiting <= 0 || int64(tx-tx0) >= sent {
		return ""
	}
	return fmt.Sprintf("the sending side stopped: %s transmitted nothing in %v (%d packets, as before) while %d datagrams written to it waited "+
		"(on make kernels' virtio-net NICs, a transmit queue the guest kernel's watchdog reports: \"%s: NETDEV WATCHDOG: ... transmit queue 0 timed out\"); "+
		"the receiving socket's rings are below",
		p.B.Name, time.Since(s.at).Round(time.Millisecond), tx, waiting, p.B.Name)
}

// txPackets is l's device counter of transmitted packets.
func txPackets(l *vethns.Link) (uint64, error) {
	var tx uint64
	err := l.NS.Do(func() error {
		link, err := netlink.LinkByName(l.Name)
		if err != nil {
			return err
		}
		tx = link.Attrs().Statistics.TxPackets
		return nil
	})
	return tx, err
}

// senderState says whether runRX's sender stopped, and why, for a
// failure message (it takes the sender's result).
func senderState(sendErr <-chan error) string {
	select {
	case err := <-sendErr:
		if err != nil {
			return "the sender stopped: " + err.Error()
		}
		return "the sender wrote every datagram"
	default:
		return "the sender is waiting for the receiver (its window is full) or writing"
	}
}
