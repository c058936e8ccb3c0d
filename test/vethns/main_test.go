package vethns

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	Sweep()
	os.Exit(LeakCheck(m))
}
