package vethns

import (
	"fmt"
	"testing"
)

// KernelFeature is an optional kernel feature that xdpkit probes for, as
// README's kernel table names it, with the Linux version that brought it.
type KernelFeature struct {
	Name  string // as in README's kernel table (a test checks it is there)
	Linux string // the version that has it, "6.6"
}

// KernelFeatures are the features a test may find missing. A test that
// needs one asks the library's own probe (never the kernel version); when
// the kernel lacks it, the test checks what the library promises instead
// (its error or its fallback) and calls NotApplicable for the part that
// cannot run.
var KernelFeatures = []KernelFeature{
	{"extended XDP_STATISTICS", "5.9"},
	{"XDP as a bpf_link", "5.9"},
	{"netdev genetlink family", "6.3"},
	{"RX metadata kfuncs", "6.3"},
	{"AF_XDP multi-buffer", "6.6"},
	{"TX metadata", "6.8"},
	{"XDP_UMEM_TX_METADATA_LEN", "6.11"},
	{"AF_XDP zero-copy on virtio_net", "6.11"},
	{"NAPI deferral per NAPI instance", "6.13"},
	{"XDP_MAX_TX_SKB_BUDGET", "6.17"},
}

// KernelFeatureByName returns the feature named name.
func KernelFeatureByName(name string) (KernelFeature, bool) {
	for _, f := range KernelFeatures {
		if f.Name == name {
			return f, true
		}
	}
	return KernelFeature{}, false
}

// NotApplicable logs that what follows in tb needs the kernel feature
// name, which this kernel lacks as the library's probe found (why says
// how), and the version that has it. The caller has already checked what
// the library does without the feature; it returns after this call (also
// with CI=true: a missing kernel feature is not a failure of the test bed,
// and make kernels counts these lines). It fails tb for a name that is
// not in KernelFeatures.
func NotApplicable(tb testing.TB, name, why string) {
	tb.Helper()
	f, ok := KernelFeatureByName(name)
	if !ok {
		tb.Fatalf("vethns: NotApplicable: %q is not in KernelFeatures", name)
		return
	}
	tb.Log(NotApplicableLine(f, why))
}

// NotApplicableLine is the line NotApplicable logs.
func NotApplicableLine(f KernelFeature, why string) string {
	return fmt.Sprintf("not applicable: needs %s (Linux %s): %s", f.Name, f.Linux, why)
}
