//go:build csumcgo && amd64 && linux

package csum

import (
	"fmt"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/csum/internal/cref"
)

// TestPairedC times Sum and CopyAndSum beside csumbench's C kernels (adc,
// avx2, avx2 copy+sum) in alternating blocks of about 64 KiB of data in
// one process, and prints each one's fastest block per call:
//
//	go test -tags csumcgo -run TestPairedC -v ./csum/
//
// It asserts nothing (the figures are for the README), so it is not run
// without the tag.
func TestPairedC(t *testing.T) {
	const rounds = 1000
	type fn struct {
		name string
		run  func(dst, buf []byte, reps int, s *uint32) float64
	}
	cfn := func(k int) func(dst, buf []byte, reps int, _ *uint32) float64 {
		return func(dst, buf []byte, reps int, _ *uint32) float64 { return cref.Time(k, dst, buf, reps) }
	}
	fns := []fn{
		{"C-adc", cfn(cref.SumADC)},
		{"C-avx2", cfn(cref.SumAVX2)},
		{"Sum", func(_, buf []byte, reps int, s *uint32) float64 {
			t0 := time.Now()
			for range reps {
				*s = Sum(buf, *s)
			}
			return float64(time.Since(t0).Nanoseconds())
		}},
		{"C-copy-avx2", cfn(cref.CopySumAVX2)},
		{"CopyAndSum", func(dst, buf []byte, reps int, s *uint32) float64 {
			t0 := time.Now()
			for range reps {
				*s = CopyAndSum(dst, buf, *s)
			}
			return float64(time.Since(t0).Nanoseconds())
		}},
	}
	for _, n := range []int{20, 64, 128, 256, 320, 512, 1024, 1500, 4096, 65536} {
		buf := layoutBuf(t, layout{"mid-page", n})
		dst := layoutBuf(t, layout{"mid-page", n})
		for i := range buf {
			buf[i] = byte(i*7 + 3)
		}
		reps := max(4, (64<<10)/max(n, 64))
		best := make([]float64, len(fns))
		for i := range best {
			best[i] = 1e18
		}
		s := sink
		for range rounds {
			for j, f := range fns {
				best[j] = min(best[j], f.run(dst, buf, reps, &s))
			}
		}
		sink = s
		line := fmt.Sprintf("%6d", n)
		for j, f := range fns {
			line += fmt.Sprintf("  %s %7.2f ns", f.name, best[j]/float64(reps))
		}
		t.Log(line)
	}
}
