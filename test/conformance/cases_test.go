package conformance

import (
	"testing"
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
