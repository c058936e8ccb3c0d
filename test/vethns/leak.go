package vethns

import (
	"bytes"
	"fmt"
	"github.com/xdpkit/xdpkit/umem"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"
)

// Slack allowed by LeakCheck. The Go runtime and the testing package open a
// few descriptors of their own on first use (the netpoller's epoll fd and
// eventfd), which are not leaks; LeakCheck opens the netpoller before
// taking its baseline, and what remains is 0 extra descriptors on Linux
// 6.18 / Go 1.26. Mappings are counted only where xdpkit makes them (AF_XDP
// ring mappings and live UMEMs), so none may remain. A leaked AF_XDP socket
// is one fd and three or four ring mappings. Tests may change both before
// calling LeakCheck.
var (
	FDSlack   = 0 // file descriptors: none may remain
	MMapSlack = 0 // AF_XDP ring mappings plus live UMEMs: none may remain
)

// LeakCheck runs m and fails the run (exit code 1, with a list of what was
// left) when, once the tests are done, the process holds more than FDSlack more file descriptors or
// MMapSlack more mappings than before them. VETHNS_LEAK_VERBOSE=1 in the
// environment prints both counts. Use it in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(vethns.LeakCheck(m)) }
func LeakCheck(m interface{ Run() int }) int {
	warmUp()
	fds0, maps0 := openFDs(), countMaps()

	code := m.Run()

	// Give goroutines that close things on their way out a moment, but do
	// not run the garbage collector first: a descriptor that only an
	// os.File finalizer would close is a leak in a long-running program.
	var fds1 map[string]string
	var maps1 int
	for range 10 {
		fds1, maps1 = openFDs(), countMaps()
		if len(fds1) <= len(fds0)+FDSlack && maps1 <= maps0+MMapSlack {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if os.Getenv("VETHNS_LEAK_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "vethns.LeakCheck: fds %d -> %d (slack %d), mappings %d -> %d (slack %d)\n",
			len(fds0), len(fds1), FDSlack, maps0, maps1, MMapSlack)
	}
	if code != 0 {
		return code
	}
	failed := false
	if d := len(fds1) - len(fds0); d > FDSlack {
		failed = true
		fmt.Fprintf(os.Stderr, "vethns.LeakCheck: %d file descriptors leaked (%d before the tests, %d after, slack %d):\n",
			d, len(fds0), len(fds1), FDSlack)
		var fds []string
		for fd, target := range fds1 {
			if fds0[fd] != target {
				fds = append(fds, fmt.Sprintf("\tfd %s -> %s\n", fd, target))
			}
		}
		slices.Sort(fds)
		for _, s := range fds {
			fmt.Fprint(os.Stderr, s)
		}
	}
	if d := maps1 - maps0; d > MMapSlack {
		failed = true
		fmt.Fprintf(os.Stderr, "vethns.LeakCheck: %d memory mappings leaked (%d before the tests, %d after, slack %d)\n",
			d, maps0, maps1, MMapSlack)
	}
	if failed {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		fmt.Fprintf(os.Stderr, "vethns.LeakCheck: after a garbage collection (finalizers) %d descriptors and %d mappings remain above the baseline\n",
			len(openFDs())-len(fds0), countMaps()-maps0)
		fmt.Fprintln(os.Stderr, "FAIL: resource leak")
		return 1
	}
	return 0
}

// warmUp makes the runtime open what it opens once per process (the
// netpoller), so that it is part of the baseline.
func warmUp() {
	r, w, err := os.Pipe()
	if err == nil {
		r.SetReadDeadline(time.Now())
		r.Close()
		w.Close()
	}
}

// openFDs maps each open descriptor number to what it points to.
func openFDs() map[string]string {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	m := make(map[string]string, len(names))
	own := strconv.Itoa(int(d.Fd()))
	for _, n := range names {
		if n == own {
			continue
		}
		target, _ := os.Readlink("/proc/self/fd/" + n)
		m[n] = target
	}
	return m
}

// countMaps counts the mappings xdpkit makes: AF_XDP rings (shown as
// "socket:[inode]" in /proc/self/maps) and UMEMs (umem.Live). Other
// mappings come and go with the Go heap and with OS threads that tests
// lock and discard, so counting them all would be noise, not a signal.
func countMaps() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("socket:[")) + umem.Live()
}
