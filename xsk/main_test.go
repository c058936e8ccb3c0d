package xsk

import (
	"os"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// TestMain fails the run when a test leaves a UMEM mapped, a ring mapped
// or a descriptor open. testUMEM, shared by the ring tests, is closed
// before the check.
func TestMain(m *testing.M) {
	os.Exit(vethns.LeakCheck(&closing{m}))
}

type closing struct{ m *testing.M }

func (c *closing) Run() int {
	code := c.m.Run()
	if testUMEM != nil {
		if err := testUMEM.Close(); err != nil {
			println("xsk: closing the test UMEM:", err.Error())
			return 1
		}
	}
	return code
}
