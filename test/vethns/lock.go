package vethns

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LockFile is the file that [Exclusive] locks. Its directory is the
// system's temporary directory, shared by every test process of the host.
var LockFile = filepath.Join(os.TempDir(), "xdpkit-vethns-tests.lock")

// Exclusive blocks until this process holds an exclusive flock(2) on
// LockFile, and keeps it until the process exits (the kernel drops the lock
// with the last descriptor). Packages whose tests send traffic through veth
// call it first thing in TestMain, before the leak check takes its
// baseline, so that `go test ./...` with Go's default package parallelism
// runs them one at a time: two such test binaries at once would make each
// other's traffic the load that overflows veth's 256-entry XDP ring.
// Waiting for the lock does not count against -timeout, whose clock starts
// in m.Run. A process started by one that holds the lock (a test binary
// running itself again as a helper) inherits lockedEnv and does not wait.
func Exclusive() {
	if os.Getenv(lockedEnv) != "" {
		return
	}
	// A raw descriptor, not an *os.File: no finalizer can close it (and
	// drop the lock) while the process runs.
	fd, err := unix.Open(LockFile, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o666)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vethns: cannot open %s, running unserialised: %v\n", LockFile, err)
		return
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vethns: cannot lock %s, running unserialised: %v\n", LockFile, err)
		unix.Close(fd)
		return
	}
	os.Setenv(lockedEnv, LockFile)
}

// lockedEnv is set in the environment of a process that holds the lock.
const lockedEnv = "XDPKIT_VETHNS_LOCKED"

// ForceReadBuffer sets c's receive buffer to n bytes with SO_RCVBUFFORCE,
// which, unlike SetReadBuffer, is not capped by net.core.rmem_max (it needs
// CAP_NET_ADMIN), and checks that the kernel took at least n.
func ForceReadBuffer(c *net.UDPConn, n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	got := 0
	err = rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n); serr != nil {
			serr = os.NewSyscallError("setsockopt(SO_RCVBUFFORCE)", serr)
			return
		}
		got, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	if got < n {
		return fmt.Errorf("vethns: receive buffer %d bytes after SO_RCVBUFFORCE %d", got, n)
	}
	return nil
}
