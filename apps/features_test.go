package apps_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// multiBufferErr asks the library whether ifname in ns binds with
// multi-buffer (XDP_USE_SG): nil when it does, the error matching
// xsk.ErrNotSupported when the kernel or the driver lacks it. Any other
// failure fails t.
func multiBufferErr(t *testing.T, ns *vethns.NS, ifname string) error {
	t.Helper()
	var unsupported error
	err := ns.Do(func() error {
		u, err := umem.New(nil)
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := xsk.New(ifname, 0, u, &xsk.Config{MultiBuffer: true, NoTX: true})
		if errors.Is(err, xsk.ErrNotSupported) {
			unsupported = err
			return nil
		}
		if err != nil {
			return err
		}
		return s.Close()
	})
	if err != nil {
		t.Fatalf("multi-buffer probe on %s: %v", ifname, err)
	}
	return unsupported
}

// txMetadataErr asks the library whether the kernel takes a UMEM with a
// TX metadata area (what the offload policy needs): nil when it does, the
// error matching umem.ErrNotSupported when it does not.
func txMetadataErr(t *testing.T) error {
	t.Helper()
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 64, TxMetadataLen: umem.TxMetadataSize})
	if errors.Is(err, umem.ErrNotSupported) {
		return err
	}
	if err != nil {
		t.Fatalf("TX metadata probe: %v", err)
	}
	return u.Close()
}

// refusedMultiBuffer checks what the library promises where multi-buffer
// is missing (probe, from multiBufferErr): xdpfwd, run with args in ns,
// exits with the library's error naming it, not a plain bind error.
// Then the test has nothing more to run: NotApplicable.
func refusedMultiBuffer(t *testing.T, probe error, ns *vethns.NS, args ...string) {
	t.Helper()
	_, stderr, code := runIn(t, ns, 60*time.Second, "xdpfwd", args...)
	if code != cli.ExitError || !strings.Contains(stderr, "not supported: multi-buffer") {
		t.Fatalf("xdpfwd on jumbo frames without multi-buffer (%v): exit %d, stderr %q; want exit %d and the library's \"not supported: multi-buffer\"",
			probe, code, stderr, cli.ExitError)
	}
	t.Logf("xdpfwd: %s", strings.TrimSpace(stderr))
	vethns.NotApplicable(t, "AF_XDP multi-buffer", probe.Error())
}

// refusedOffload checks what xdpgen promises where the kernel takes no
// UMEM with a TX metadata area (probe, from txMetadataErr): -policy
// offload, which needs it, exits with an error that says so. Then the
// test has nothing more to run with that policy: NotApplicable.
func refusedOffload(t *testing.T, probe error, ns *vethns.NS, ifname string, dst netip.Addr) {
	t.Helper()
	_, stderr, code := runIn(t, ns, 60*time.Second, "xdpgen", "-i", ifname, "-dst", dst.String(), "-count", "10", "-size", rbSizes(dst.Is6()), "-quiet", "-policy", "offload")
	if code != cli.ExitError || !strings.Contains(stderr, "no TX metadata area for checksum offload") {
		t.Fatalf("xdpgen -policy offload without TX metadata (%v): exit %d, stderr %q; want exit %d and \"no TX metadata area for checksum offload\"",
			probe, code, stderr, cli.ExitError)
	}
	t.Logf("xdpgen: %s", strings.TrimSpace(stderr))
	vethns.NotApplicable(t, "XDP_UMEM_TX_METADATA_LEN", probe.Error())
}
