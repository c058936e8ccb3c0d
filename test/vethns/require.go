package vethns

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

var (
	probeOnce sync.Once
	probeErr  error
)

// probe creates and deletes one namespace, the only reliable answer to
// "can namespace tests run here" (capabilities, seccomp, a read-only /run
// and kernels without CONFIG_NET_NS all show up as a failure here).
func probe() error {
	probeOnce.Do(func() {
		ns, err := createNS("probe")
		if err != nil {
			probeErr = err
			return
		}
		probeErr = ns.Close()
	})
	return probeErr
}

// InCI reports whether CI=true is set, in which case Require fails
// instead of skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require skips tb when namespace tests cannot run here (not root / no
// CAP_NET_ADMIN and CAP_SYS_ADMIN, no netns support); when the environment
// variable CI=true it calls tb.Fatal instead of skipping.
func Require(tb testing.TB) {
	tb.Helper()
	require(tb, probe(), InCI())
}

func require(tb testing.TB, err error, ci bool) {
	tb.Helper()
	if err != nil {
		msg := fmt.Sprintf("vethns: namespace tests cannot run here (need root: CAP_SYS_ADMIN to create and mount namespaces, CAP_NET_ADMIN for links): %v", err)
		if ci {
			tb.Fatal(msg + " [CI=true: failing instead of skipping]")
			return // Fatal does not return; this is for fake TBs
		}
		tb.Skip(msg)
	}
}
