package conformance

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/xsk"
)

// TestPOLL_TXQ_FULL is testapp_poll_txq_tmout: a sender alone, 2048-byte
// frames, that never reads its Completion ring. Once the Completion ring
// is full the kernel stops taking descriptors, the TX ring fills up, and
// poll(POLLOUT) on the socket times out. WaitTX, which also wakes for
// completions waiting to be read, returns at once then.
func TestPOLL_TXQ_FULL(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		s := tc.tx
		s.usePoll = true
		s.frameSize = 2048
		run(t, tc.setupOnly(s))
		sock := s.socks[0]
		tx := sock.TX()
		descs := make([]xsk.Desc, s.batch)
		total := 2 * defaultPktCnt
		for sent := 0; sent < total; {
			if tx.Free() < s.batch {
				fds := []unix.PollFd{{Fd: int32(sock.FD()), Events: unix.POLLOUT}}
				n, err := unix.Poll(fds, 1000)
				if err != nil && !errors.Is(err, unix.EINTR) {
					t.Fatalf("poll: %v", err)
				}
				if n > 0 {
					continue // writable: the kernel took descriptors
				}
				// Timed out: the TX ring is more than half full and the
				// Completion ring, never read, is full.
				if c := sock.Completion(); c.Len() != c.Size() {
					t.Fatalf("poll(POLLOUT) timed out with %d of %d Completion entries used", c.Len(), c.Size())
				}
				if p := tx.Pending(); p <= tx.Size()/2 {
					t.Fatalf("poll(POLLOUT) timed out with %d of %d TX entries pending", p, tx.Size())
				}
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				if err := sock.WaitTX(ctx); err != nil {
					t.Fatalf("WaitTX with completions waiting: %v", err)
				}
				return
			}
			for i := range descs {
				a := s.alloc()
				tc.generate(s, 0, a, 2048, uint32(sent+i), 0)
				descs[i] = xsk.Desc{Addr: a, Len: 2048}
			}
			if n := tx.Produce(descs); n != len(descs) {
				t.Fatalf("TX ring took %d of %d", n, len(descs))
			}
			sent += len(descs)
			if err := sock.KickTX(); err != nil && !errors.Is(err, unix.ENETDOWN) {
				t.Fatalf("kick: %v", err)
			}
		}
		t.Fatalf("%d packets taken with the Completion ring never read: poll(POLLOUT) never timed out", total)
	})
}

// TestHW_SW_MIN_RING_SIZE and TestHW_SW_MAX_RING_SIZE resize the NIC's
// rings (ETHTOOL_SRINGPARAM) before sending. veth has no ring
// parameters: the kernel suite skips the cases there; here the library
// must say so with ErrNotSupported, for reading and for setting.
func TestHW_SW_MIN_RING_SIZE(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) { noRingParams(t, tc, defaultBatchSize*2, defaultBatchSize) })
}

func TestHW_SW_MAX_RING_SIZE(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) { noRingParams(t, tc, 1<<15, 1<<15) })
}

func noRingParams(t *testing.T, tc *testSpec, rx, tx uint32) {
	err := tc.d.do(func() error {
		if _, err := xsk.Rings(tc.tx.ifname); !errors.Is(err, xsk.ErrNotSupported) {
			t.Errorf("Rings(%s) = %v, want ErrNotSupported", tc.tx.ifname, err)
		}
		if err := xsk.SetRings(tc.tx.ifname, rx, tx); !errors.Is(err, xsk.ErrNotSupported) {
			t.Errorf("SetRings(%s, %d, %d) = %v, want ErrNotSupported", tc.tx.ifname, rx, tx, err)
		}
		return nil
	})
	run(t, err)
	// The traffic the case sends after the resize still flows, with the
	// batch sizes of its first step: one packet at a time.
	tc.tx.batch, tc.rx.batch = 1, 1
	run(t, tc.validateTraffic())
}
