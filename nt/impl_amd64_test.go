//go:build amd64 && gc && !purego

package nt

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// implementations lists every NT implementation of this build, each with a
// function that forces it (switching the feature flags) and returns a
// function that restores the flags.
func implementations() []impl {
	force := func(avx512, avx2 bool) func() func() {
		return func() func() {
			o512, o2 := hasAVX512, hasAVX2
			hasAVX512, hasAVX2 = avx512, avx2
			return func() { hasAVX512, hasAVX2 = o512, o2 }
		}
	}
	return []impl{
		{"avx512", cpu.X86.HasAVX512F, force(true, false)},
		{"avx2", cpu.X86.HasAVX2, force(false, true)},
		{"sse2", true, force(false, false)},
	}
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
