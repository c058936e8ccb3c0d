package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWaitWake runs a waiter and a waker on one named pipe: the waiter
// reads every byte, parks at least once (the waker writes them 1 ms apart,
// so the pipe is empty between) and reports its CPU time.
func TestWaitWake(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run([]string{"-m", "wait", fifo, "50"}, &out, &errOut) }()
	// The waker's open blocks until the waiter has the pipe open.
	werr := run([]string{"-m", "wake", fifo, "50", "1ms"}, nil, nil)
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v (waker: %v)", err, werr)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if !strings.Contains(errOut.String(), "wakebench: ready") {
		t.Errorf("stderr %q lacks the ready line", errOut.String())
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if r.Impl != "go" || r.Bytes != n || r.Wakes < 1 || r.Wakes > n || r.CPUNs <= 0 {
		t.Errorf("result %+v: want impl go, %d bytes, 1 to %d wake-ups, CPU time", r, n, n)
	}
}

// TestRunUsage: bad arguments fail before any work, on paths where the
// work itself would succeed (a pipe to wait on, a file to write to).
func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	fifo, file := filepath.Join(dir, "fifo"), filepath.Join(dir, "file")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{}, {"-m", "wait", fifo}, {"-m", "wait", fifo, "0"}, {"-m", "wait", fifo, "x"},
		{"-m", "wake", file, "5"}, {"-m", "wake", file, "5", "0s"}, {"-m", "wake", file, "5", "-1ms"},
		{"-m", "wake", file, "5", "2s"}, {"-m", "other", file, "5"}, {"-x", "wake", file, "5", "1ms"},
	} {
		if err := run(args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) did not fail", args)
		}
	}
}
