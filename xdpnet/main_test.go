package xdpnet_test

import (
	"os"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestMain(m *testing.M) {
	vethns.Exclusive()
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}
