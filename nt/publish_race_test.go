//go:build race

package nt

import "sync/atomic"

// publish is atomic.Store under the race detector (see
// publish_norace_test.go for why the normal build does not use it).
func publish(p *atomic.Uint64, v uint64) { p.Store(v) }
