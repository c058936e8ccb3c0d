//go:build linux

package csum

import (
	"testing"

	"github.com/xdpkit/xdpkit/internal/asmtest"
)

// layoutBuf returns a buffer of l.size bytes placed as l.name says (see
// layouts), in a mapping of its own with a PROT_NONE page after the data
// pages, unmapped when b ends.
func layoutBuf(b testing.TB, l layout) []byte {
	const ps = 4096 // the layouts are about 4 KiB pages and frames
	off := 0
	switch l.name {
	case "page-end":
		off = (-l.size) & (ps - 1)
	case "page-aligned":
	case "mid-page":
		off = ps / 2
	case "frame":
		off = 256
	case "frame-end":
		off = ps - l.size
	default:
		b.Fatalf("unknown layout %q", l.name)
	}
	pages := (off + l.size + ps - 1) / ps
	g := asmtest.Guarded(b, max(pages, 1))
	return g[off : off+l.size : off+l.size]
}
