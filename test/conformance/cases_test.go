package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// run fails the test when the case's traffic failed.
func run(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSEND_RECEIVE(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) { run(t, tc.validateTraffic()) })
}

func TestSEND_RECEIVE_2K_FRAME(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.tx.frameSize, tc.rx.frameSize = 2048, 2048
		tc.setStreams(genStream(defaultPktCnt, minPktSize), genStream(defaultPktCnt, minPktSize))
		run(t, tc.validateTraffic())
	})
}

func TestSEND_RECEIVE_SINGLE_PKT(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.setStreams(custom([]pkt{{len: minPktSize, valid: true}}))
		run(t, tc.validateTraffic())
	})
}

func TestPOLL_RX(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.rx.usePoll = true
		run(t, tc.validateTraffic())
	})
}

func TestPOLL_TX(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.tx.usePoll = true
		run(t, tc.validateTraffic())
	})
}

// TestPOLL_RXQ_FULL: a receiver alone; its poll (WaitRX) times out
// with nothing received (testapp_poll_rxq_tmout).
func TestPOLL_RXQ_FULL(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.rx.usePoll = true
		tc.tx.txOn = false
		tc.tx.rxOn = false
		run(t, tc.setupOnly(tc.rx))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := tc.rx.socks[0].WaitRX(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitRX with nothing sent = %v, want a timeout", err)
		}
		if n := tc.rx.socks[0].RX().Len(); n != 0 {
			t.Fatalf("RX ring holds %d descriptors with nothing sent", n)
		}
	})
}

func TestUMEM_HEADROOM(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.rx.headroom = umemHeadroomTest
		run(t, tc.validateTraffic())
	})
}

func TestBIDIRECTIONAL(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.tx.rxOn, tc.rx.txOn = true, true
		run(t, tc.validateTraffic())
		// Switch directions: the same sockets, the other way.
		tc.tx.streams[0], tc.rx.streams[0] = tc.rxDefault, tc.txDefault
		tc.tx.socks[0].Fill() // the former sender's Fill ring was stocked in setup
		run(t, tc.traffic(tc.rx, tc.tx))
	})
}

func TestSTAT_FILL_EMPTY(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.setStreams(genStream(defaultUMEMBufs+defaultUMEMBufs/2, minPktSize), genStream(defaultUMEMBufs, minPktSize))
		tc.rx.useFill = false
		tc.rx.valid = func(s *side) error {
			st, err := stats(s)
			if err != nil {
				return err
			}
			if st.RXFillRingEmptyDesc == 0 {
				return fmt.Errorf("rx_fill_ring_empty_descs 0 after %d packets for %d frames", len(tc.tx.streams[0].pkts), s.numFrames)
			}
			return nil
		}
		run(t, tc.validateTraffic())
	})
}

func TestXDP_DROP_HALF(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.prog = progDropHalf
		tc.setStreams(tc.txDefault, receiveHalf(tc.txDefault))
		run(t, tc.validateTraffic())
	})
}

func TestXDP_METADATA_COPY(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.prog = progMetadata
		tc.rx.useMeta = true
		run(t, tc.validateTraffic())
	})
}

// TestXDP_SHARED_UMEM: two sockets on each side's one queue, the second
// sharing the first's UMEM and rings (xsk.NewShared); the program
// steers by destination MAC, socket j's packets to socket j.
func TestXDP_SHARED_UMEM(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.prog = progSharedUMEM
		tc.nbSockets = 2
		for i := 0; i < 2; i++ {
			tc.tx.streams[i] = genStreamFrom(defaultPktCnt/2, minPktSize, uint32(i), 2)
			tc.rx.streams[i] = genStreamFrom(defaultPktCnt/2, minPktSize, uint32(i), 2)
		}
		run(t, tc.validateTraffic())
	})
}

func TestSEND_RECEIVE_UNALIGNED(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.tx.unaligned, tc.rx.unaligned = true, true
		needHugePages(t, 4)
		// Half of the packets straddle a 4K boundary.
		tc.setStreams(replaceHalf(tc.txDefault, minPktSize, -minPktSize/2), replaceHalf(tc.rxDefault, minPktSize, -minPktSize/2))
		run(t, tc.validateTraffic())
	})
}

func TestTX_QUEUE_CONSUMER(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		if tc.m.zc {
			t.Skip("the kernel suite does not run TX_QUEUE_CONSUMER in zero-copy mode")
		}
		n := maxTXBudget + 1
		tc.setStreams(genStream(n, minPktSize), genStream(n, minPktSize))
		tc.tx.batch = n
		tc.tx.checkCons = true
		run(t, tc.validateTraffic())
	})
}

// TestTEARDOWN: ten times over, everything set up, used and torn down.
func TestTEARDOWN(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		for i := 0; i < 10; i++ {
			run(t, tc.validateTraffic())
			tc.clean()
		}
	})
}

// TestXDP_PROG_CLEANUP: two sockets per side on one queue (the second
// sharing the first's UMEM); traffic through socket 0, then socket 1
// takes key 0 of the XSKMAP and the traffic goes through it.
func TestXDP_PROG_CLEANUP(t *testing.T) {
	forModes(t, func(t *testing.T, tc *testSpec) {
		tc.nbSockets = 2
		run(t, tc.validateTraffic())
		for _, s := range []*side{tc.tx, tc.rx} {
			s.streams[0], s.streams[1] = nil, s.streams[0]
		}
		var err error
		if e := tc.d.do(func() error { return tc.rx.xsks.RegisterKey(0, tc.rx.socks[1]) }); e != nil {
			err = e
		}
		run(t, err)
		run(t, tc.traffic(tc.tx, tc.rx))
	})
}
