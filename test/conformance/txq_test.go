package conformance

import (
	"context"
	"errors"
	"fmt"
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

// TestHW_SW_MIN_RING_SIZE and TestHW_SW_MAX_RING_SIZE resize the
// device's rings (ETHTOOL_SRINGPARAM) before sending, as the kernel suite
// does where the device has ring parameters (virtio_net in ZC mode). veth
// has none: the kernel suite skips the cases there; here the library must
// say so with ErrNotSupported, for reading and for setting, and the
// traffic still flows with the cases' batch sizes.
func TestHW_SW_MIN_RING_SIZE(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		if resizeRings(t, tc, func(RingParams) (uint32, uint32) { return defaultBatchSize * 2, defaultBatchSize }) {
			tc.tx.batch, tc.rx.batch = 1, 1
			run(t, tc.validateTraffic())
			// A batch of the TX ring's size less one.
			tc.tx.batch, tc.rx.batch = defaultBatchSize-1, defaultBatchSize-1
			run(t, tc.validateTraffic())
			return
		}
		tc.tx.batch, tc.rx.batch = 1, 1
		run(t, tc.validateTraffic())
	})
}

// In ZC the case does not run: on virtio_net in the Linux 6.17 guest,
// rings resized to their maximum and an AF_XDP zero-copy UMEM of 8192
// frames left the kernel with pages in a bad state ("BUG: Bad page
// state", then a general protection fault).
func TestHW_SW_MAX_RING_SIZE(t *testing.T) {
	forModesNoZC(t, "virtio_net's rings at their maximum under a zero-copy socket crashed the guest kernel (Bad page state)", func(t *testing.T, tc *testSpec) {
		var hw RingParams
		if resizeRings(t, tc, func(r RingParams) (uint32, uint32) { hw = r; return r.RXMax, r.TXMax }) {
			const maxDescs = defaultRingSize * 4
			tc.rx.numFrames, tc.rx.fillSize, tc.rx.compSize = maxDescs, maxDescs, maxDescs
			// The kernel suite leaves the sender's UMEM at 1024 frames,
			// fewer than a batch of 2048: its pacing (packets in flight
			// below the UMEM's frames less a batch) then never lets it
			// send. The sender's UMEM is as large as the receiver's.
			tc.tx.numFrames = maxDescs
			tc.tx.batch, tc.rx.batch = defaultRingSize, defaultRingSize
			run(t, tc.validateTraffic())
			if hw.TXMax > 8 {
				tc.clean()
				tc.tx.batch, tc.rx.batch = int(hw.TXMax-8), int(hw.TXMax-8)
				tc.setStreams(genStream(maxDescs, minPktSize), genStream(maxDescs, minPktSize))
				run(t, tc.validateTraffic())
			}
			return
		}
		tc.tx.batch, tc.rx.batch = 1, 1
		run(t, tc.validateTraffic())
	})
}

// RingParams is xsk.RingParams.
type RingParams = xsk.RingParams

// resizeRings sets the sending device's ring sizes to what size returns
// from the current ones (rx, tx pending), putting them back when the
// test ends; it reports false, having checked the library's
// ErrNotSupported, where the device has no ring parameters (veth), or
// cannot resize them.
func resizeRings(t *testing.T, tc *testSpec, size func(RingParams) (rx, tx uint32)) bool {
	t.Helper()
	var resized bool
	err := tc.tx.ns.Do(func() error {
		cur, err := xsk.Rings(tc.tx.ifname)
		if errors.Is(err, xsk.ErrNotSupported) {
			rx, tx := size(RingParams{RXMax: 1 << 15, TXMax: 1 << 15})
			if err := xsk.SetRings(tc.tx.ifname, rx, tx); !errors.Is(err, xsk.ErrNotSupported) {
				return fmt.Errorf("SetRings(%s, %d, %d) = %v on a device without ring parameters, want ErrNotSupported", tc.tx.ifname, rx, tx, err)
			}
			t.Logf("%s has no ring parameters: %v", tc.tx.ifname, err)
			return nil
		}
		if err != nil {
			return err
		}
		rx, tx := size(cur)
		err = xsk.SetRings(tc.tx.ifname, rx, tx)
		if errors.Is(err, xsk.ErrNotSupported) {
			t.Logf("%s cannot resize its rings: %v", tc.tx.ifname, err)
			return nil
		}
		if err != nil {
			return err
		}
		t.Cleanup(func() {
			// With the sockets closed first: no ring is resized under
			// a bound socket (the kernel suite resets the sizes before
			// the next case).
			tc.clean()
			if err := tc.tx.ns.Do(func() error { return xsk.SetRings(tc.tx.ifname, cur.RX, cur.TX) }); err != nil {
				t.Errorf("put the rings of %s back: %v", tc.tx.ifname, err)
			}
		})
		got, err := xsk.Rings(tc.tx.ifname)
		if err != nil {
			return err
		}
		if got.RX != rx || got.TX != tx {
			return fmt.Errorf("rings of %s: rx %d tx %d after SetRings(%d, %d)", tc.tx.ifname, got.RX, got.TX, rx, tx)
		}
		resized = true
		return nil
	})
	run(t, err)
	return resized
}
