package txpath

import (
	"fmt"
	"testing"
)

var benchPolicies = []Policy{Software, Offload, NT, Plain}

// BenchmarkBuildUDP: build and queue one UDP datagram (frame of the given
// size) per op, with a device that completes at once; a batch of 64 is
// submitted every 64 ops. Must report 0 allocs/op.
func BenchmarkBuildUDP(b *testing.B) {
	for _, pol := range benchPolicies {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/%d", pol, size), func(b *testing.B) {
				s, _ := newFake(b, fakeCfg{meta: true, frames: 4096, ring: 2048, cfg: Config{Policy: pol}})
				flow, _ := NewUDPFlow(macA, macB, src4, dst4, nil)
				pl := make([]byte, size-flow.HeaderLen())
				for i := range pl {
					pl[i] = byte(i)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if err := s.SendUDP(flow, Options{}, pl); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPollution: the application reads its own working set (ws
// bytes, more than L1+L2 of one core here) between sends of one 1500-byte
// datagram, as a server touching its state per request would. The op
// time is the send plus the read: what NT stores save in cache misses on
// the working set, or cost, shows as the difference between policies.
func BenchmarkPollution(b *testing.B) {
	for _, ws := range []int{256 << 10, 1 << 20} {
		for _, pol := range []Policy{Software, Offload, NT} {
			b.Run(fmt.Sprintf("ws%dK/%s", ws>>10, pol), func(b *testing.B) {
				// Frames cycle through 16 MiB of UMEM, more than the LLC
				// slice the benchmark gets.
				s, _ := newFake(b, fakeCfg{meta: true, frames: 8192, ring: 2048, cfg: Config{Policy: pol}})
				flow, _ := NewUDPFlow(macA, macB, src4, dst4, nil)
				pl := make([]byte, 1500-flow.HeaderLen())
				work := make([]uint64, ws/8)
				for i := range work {
					work[i] = uint64(i)
				}
				var sink uint64
				b.ReportAllocs()
				for b.Loop() {
					if err := s.SendUDP(flow, Options{}, pl); err != nil {
						b.Fatal(err)
					}
					// Read 1/16 of the working set per op, cyclically.
					var acc uint64
					step := len(work) / 16
					base := (int(sink) & 15) * step
					for _, w := range work[base : base+step] {
						acc += w
					}
					sink += acc | 1
				}
				_ = sink
			})
		}
	}
}
