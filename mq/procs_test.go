package mq

import (
	"runtime"
	"testing"
)

func TestProcs(t *testing.T) {
	orig := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(orig)
	acquireProcs(2)
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("2 queues running: GOMAXPROCS %d, want 3", n)
	}
	acquireProcs(4)
	if n := runtime.GOMAXPROCS(0); n != 7 {
		t.Errorf("6 queues running: GOMAXPROCS %d, want 7", n)
	}
	releaseProcs(4)
	if n := runtime.GOMAXPROCS(0); n != 7 {
		t.Errorf("2 queues still running: GOMAXPROCS %d, want it kept at 7", n)
	}
	releaseProcs(2)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("no queue running: GOMAXPROCS %d, want 1 back", n)
	}
	// A program that set it high enough is left alone.
	runtime.GOMAXPROCS(16)
	acquireProcs(2)
	releaseProcs(2)
	if n := runtime.GOMAXPROCS(0); n != 16 {
		t.Errorf("GOMAXPROCS %d, want 16 untouched", n)
	}
}
