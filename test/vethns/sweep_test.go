package vethns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/xdpkit/xdpkit/umem"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// leftover creates a namespace named for pid and drops it the way a
// killed process would: mounted, with nobody holding it.
func leftover(t *testing.T, pid int) string {
	t.Helper()
	name := fmt.Sprintf("%s%d-%d-sweep", namePrefix, pid, nextSeq())
	ns, err := createNamedNS(name)
	if err != nil {
		t.Fatal(err)
	}
	ns.h.Close()
	t.Cleanup(func() { unmountAndRemove(ns.Path()) })
	return name
}

func TestSweep(t *testing.T) {
	Require(t)
	// A dead pid: a child's, once reaped (tried again if the pid was
	// reused at once).
	dead := -1
	for range 10 {
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatalf("cannot start a process to get a dead pid: %v", err)
		}
		if pid := cmd.ProcessState.Pid(); !processAlive(pid) {
			dead = pid
			break
		}
	}
	if dead < 0 {
		t.Fatal("10 dead pids in a row were reused at once")
	}
	gone := leftover(t, dead)
	alive := leftover(t, 1) // pid 1 always exists
	mine := NewNS(t)

	swept := Sweep()
	if !slices.Contains(swept, gone) {
		t.Errorf("Sweep removed %v, want %s among them", swept, gone)
	}
	if _, err := os.Stat(NetnsDir + "/" + gone); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still mounted after Sweep: %v", gone, err)
	}
	for _, keep := range []string{alive, mine.Name} {
		if slices.Contains(swept, keep) {
			t.Errorf("Sweep removed %s, whose process is alive", keep)
		}
		if _, err := os.Stat(NetnsDir + "/" + keep); err != nil {
			t.Errorf("%s after Sweep: %v", keep, err)
		}
	}
}

func TestDoConcurrent(t *testing.T) {
	Require(t)
	a, b := NewNS(t), NewNS(t)
	want := map[*NS]uint64{a: nsInode(t, a.Path()), b: nsInode(t, b.Path())}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		ns := a
		if i%2 == 1 {
			ns = b
		}
		wg.Go(func() {
			errs <- ns.Do(func() error {
				var st unix.Stat_t
				if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
					return err
				}
				if st.Ino != want[ns] {
					return fmt.Errorf("in namespace %d, want %d (%s)", st.Ino, want[ns], ns.Name)
				}
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestLeakCounters(t *testing.T) {
	Require(t)
	fds, maps := len(openFDs()), countMaps()
	f, err := os.Open("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	u, err := umem.New(&umem.Config{FrameCount: 16})
	if err != nil {
		t.Fatal(err)
	}
	if d := len(openFDs()) - fds; d != 2 { // the file and the UMEM's socket
		t.Errorf("openFDs grew by %d after opening a file and a UMEM, want 2", d)
	}
	if d := countMaps() - maps; d != 1 {
		t.Errorf("countMaps grew by %d after a UMEM, want 1", d)
	}
	f.Close()
	u.Close()
	if d := len(openFDs()) - fds; d != 0 {
		t.Errorf("openFDs off by %d after closing", d)
	}
	if d := countMaps() - maps; d != 0 {
		t.Errorf("countMaps off by %d after closing", d)
	}
}

// TestHelperProcess is not a real test: the tests below run the test
// binary again with VETHNS_HELPER set, to watch cleanup from outside.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("VETHNS_HELPER")
	if mode == "" {
		return // not run as a helper
	}
	a, b := NewNS(t), NewNS(t)
	NewPair(t, a, b, nil)
	fmt.Printf("NS %s %s\n", a.Name, b.Name)
	switch mode {
	case "fail":
		t.Fatal("failing on purpose")
	case "hang":
		os.Stdout.Sync()
		time.Sleep(time.Minute) // killed by the parent long before
	}
}

// helper starts the test binary running TestHelperProcess in mode and
// returns it with the namespace names it printed.
func helper(t *testing.T, mode string) (*exec.Cmd, *bufio.Reader, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "VETHNS_HELPER="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper exited before naming its namespaces: %v", err)
		}
		if names, ok := strings.CutPrefix(strings.TrimSpace(line), "NS "); ok {
			return cmd, r, strings.Fields(names)
		}
	}
}

func TestCleanupOnFailure(t *testing.T) {
	Require(t)
	cmd, r, names := helper(t, "fail")
	rest, _ := io.ReadAll(r)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(rest), "failing on purpose") {
		t.Fatalf("helper: %v, output %s; want it to fail on purpose", err, rest)
	}
	for _, n := range names {
		if _, err := os.Stat(NetnsDir + "/" + n); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind by a failing test (%v)", n, err)
		}
	}
}

func TestSweepAfterKill(t *testing.T) {
	Require(t)
	cmd, _, names := helper(t, "hang")
	for _, n := range names {
		if _, err := os.Stat(NetnsDir + "/" + n); err != nil {
			t.Fatalf("helper's %s: %v", n, err)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for _, n := range names {
		if _, err := os.Stat(NetnsDir + "/" + n); err != nil {
			t.Fatalf("%s gone before Sweep (%v): the kill did not leave it behind", n, err)
		}
	}
	swept := Sweep()
	for _, n := range names {
		if !slices.Contains(swept, n) {
			t.Errorf("Sweep returned %v, want %s among them", swept, n)
		}
		if _, err := os.Stat(NetnsDir + "/" + n); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Sweep: %v", n, err)
		}
	}
}
