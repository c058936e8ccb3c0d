package conformance

import (
	"os"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestMain takes the host-wide veth lock and fails the run when a case
// leaves a UMEM, a descriptor or a BPF map behind.
func TestMain(m *testing.M) {
	vethns.Exclusive()
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}
