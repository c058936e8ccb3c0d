package vethns

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if ns := os.Getenv("XK_CHILD_NS"); ns != "" {
		os.Exit(childAttachAndHang(ns, os.Getenv("XK_CHILD_IF")))
	}
	Exclusive()
	Sweep()
	os.Exit(LeakCheck(m))
}
