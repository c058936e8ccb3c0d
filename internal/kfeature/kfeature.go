package kfeature

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Feature is an optional kernel feature that xdpkit probes for, as
// README's kernel table names it, with the Linux version that brought it.
type Feature struct {
	Name  string // as in README's kernel table (a test checks it is there)
	Linux string // the version that has it, "6.6"
	// Witness is a name that the kernel's BTF (/sys/kernel/btf/vmlinux)
	// has exactly when the kernel has the feature: a function or field
	// that came with it. NotApplicable fails when the witness is there,
	// so a broken probe cannot pass for a missing feature. "" where no
	// such name exists.
	Witness string
}

// Features are the features a test may find missing. A test that
// needs one asks the library's own probe (never the kernel version); when
// the kernel lacks it, the test checks what the library promises instead
// (its error or its fallback) and calls NotApplicable for the part that
// cannot run.
var Features = []Feature{
	{"extended XDP_STATISTICS", "5.9", ""},
	{"XDP attached as a bpf_link", "5.9", "bpf_xdp_link_attach"},
	{"netdev genetlink family", "6.3", "netdev_nl_dev_get_doit"},
	{"RX metadata kfuncs", "6.3", "bpf_xdp_metadata_rx_timestamp"},
	{"AF_XDP multi-buffer", "6.6", "xdp_zc_max_segs"},
	{"TX metadata", "6.8", "xsk_tx_metadata"},
	{"XDP_UMEM_TX_METADATA_LEN", "6.11", ""},
	{"NAPI deferral per NAPI instance", "6.13", "netdev_nl_napi_set_doit"},
	{"XDP_MAX_TX_SKB_BUDGET", "6.17", "max_tx_budget"},
	// A driver's: virtio_net's lives in its module, whose BTF is not
	// vmlinux's.
	{"AF_XDP zero-copy on virtio_net", "driver", ""},
}

// ByName returns the feature named name.
func ByName(name string) (Feature, bool) {
	for _, f := range Features {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// NotApplicable ends tb as not applicable (tb.SkipNow, also with CI=true):
// what follows needs the kernel feature name, which this kernel lacks as
// the library's probe found (why says how). The caller has already checked
// what the library promises without it (ErrNotSupported, a fallback).
// The skip message names the feature and the version that has it; make
// kernels counts a skip without such a message as a failure. It fails tb
// instead for a name that is not in Features, and when the kernel's
// BTF shows that the kernel has the feature after all (its Witness).
func NotApplicable(tb testing.TB, name, why string) {
	tb.Helper()
	f, ok := ByName(name)
	if !ok {
		tb.Fatalf("kfeature: NotApplicable: %q is not in Features", name)
		return
	}
	if f.Witness != "" {
		has, err := btfHas(f.Witness)
		if err != nil {
			tb.Fatalf("kfeature: NotApplicable(%s): %v", name, err)
			return
		}
		if has {
			tb.Fatalf("the kernel has %s (its BTF names %s), but the library found it missing: %s", f.Name, f.Witness, why)
			return
		}
	}
	tb.Skip(NotApplicableLine(f, why))
}

// KernelHas reports what the kernel's BTF says of the feature name: has
// is whether its Witness is there, known whether the feature has a
// witness at all (false: the BTF cannot tell).
func KernelHas(name string) (has, known bool, err error) {
	f, ok := ByName(name)
	if !ok {
		return false, false, fmt.Errorf("kfeature: %q is not in Features", name)
	}
	if f.Witness == "" {
		return false, false, nil
	}
	has, err = btfHas(f.Witness)
	return has, err == nil, err
}

var btf struct {
	once sync.Once
	b    []byte
	err  error
}

// btfHas reports whether the kernel's BTF has the name (a NUL-terminated
// string of its string section).
func btfHas(name string) (bool, error) {
	btf.once.Do(func() { btf.b, btf.err = os.ReadFile("/sys/kernel/btf/vmlinux") })
	if btf.err != nil {
		return false, fmt.Errorf("the kernel's BTF: %w", btf.err)
	}
	return bytes.Contains(btf.b, append([]byte{0}, append([]byte(name), 0)...)), nil
}

// NotApplicableLine is the line NotApplicable logs.
func NotApplicableLine(f Feature, why string) string {
	return fmt.Sprintf("not applicable: needs %s (Linux %s): %s", f.Name, f.Linux, why)
}
