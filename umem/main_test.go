package umem_test

import (
	"os"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestMain fails the run when a test leaves a UMEM mapped or a descriptor
// open.
func TestMain(m *testing.M) { os.Exit(vethns.LeakCheck(m)) }
