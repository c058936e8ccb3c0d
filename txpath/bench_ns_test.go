package txpath_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// BenchmarkTX sends frames of 64 and 1500 bytes through veth (copy mode)
// per policy and reports Mpps. The frames are addressed to a MAC that is
// not the peer's, so the peer drops them right after the veth hop and the
// measurement is the sending side's.
func BenchmarkTX(b *testing.B) {
	e := newEnv(b, 1500)
	for _, pol := range []txpath.Policy{txpath.Software, txpath.Offload, txpath.NT, txpath.Plain} {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/%d", pol, size), func(b *testing.B) {
				err := e.a.Do(func() error { return benchTX(b, e, pol, size) })
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func benchTX(b *testing.B, e *env, pol txpath.Policy, size int) error {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096, TxMetadataLen: umem.TxMetadataSize})
	if err != nil {
		return err
	}
	defer u.Close()
	sock, err := xsk.New(e.p.A.Name, 0, u, &xsk.Config{NoRX: true, TXSize: 2048, CompletionSize: 2048})
	if err != nil {
		return err
	}
	defer sock.Close()
	s, err := txpath.New(sock, &txpath.Config{Policy: pol})
	if err != nil {
		return err
	}
	src, dst := e.addrs(false)
	flow, err := txpath.NewUDPFlow(e.p.A.MAC, net.HardwareAddr{0x02, 0xde, 0xad, 0, 0, 1}, src, dst, nil)
	if err != nil {
		return err
	}
	pl := make([]byte, size-flow.HeaderLen())
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for {
			err := s.SendUDP(flow, txpath.Options{}, pl)
			if err == nil {
				break
			}
			if !errors.Is(err, txpath.ErrNoFrames) && !errors.Is(err, txpath.ErrRingFull) {
				return err
			}
			if err := s.Wait(ctx); err != nil {
				return err
			}
		}
	}
	if err := s.Drain(ctx); err != nil {
		return err
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	st := s.Stats()
	b.ReportMetric(float64(st.Kicks)/float64(b.N), "kicks/op")
	return s.Close()
}
