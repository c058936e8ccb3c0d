//go:build amd64 && gc && !purego

package nt

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// implementations lists every NT implementation of this build, each with a
// function that forces it (switching the feature flags) and returns a
// function that restores the flags. Only those the CPU has are present;
// TestImplsPresent checks that none the CPU has is missing.
func implementations() []impl {
	force := func(avx512, avx2 bool) func() func() {
		return func() func() {
			o512, o2 := hasAVX512, hasAVX2
			hasAVX512, hasAVX2 = avx512, avx2
			return func() { hasAVX512, hasAVX2 = o512, o2 }
		}
	}
	var l []impl
	if cpu.X86.HasAVX512F {
		l = append(l, impl{"avx512", true, force(true, false)})
	}
	if cpu.X86.HasAVX2 {
		l = append(l, impl{"avx2", true, force(false, true)})
	}
	return append(l, impl{"sse2", true, force(false, false)})
}

func TestImplName(t *testing.T) {
	for _, im := range implementations() {
		if !im.present {
			continue
		}
		restore := im.force()
		if got := implName(); got != im.name {
			t.Errorf("forced %s, implName() = %s", im.name, got)
		}
		restore()
	}
}
