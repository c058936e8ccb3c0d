package vethns

import (
	"testing"

	"github.com/xdpkit/xdpkit/internal/kfeature"
)

// NotApplicable ends tb as not applicable: the kernel lacks the feature
// name (of internal/kfeature's list), as the library's probe found (why).
// See kfeature.NotApplicable.
func NotApplicable(tb testing.TB, name, why string) {
	tb.Helper()
	kfeature.NotApplicable(tb, name, why)
}
