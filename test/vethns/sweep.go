package vethns

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Sweep deletes namespaces under /run/netns named "xk-<pid>-*" whose
// process is gone, left behind by test processes that were killed before
// their cleanup ran. It is best-effort and meant for TestMain; it returns
// the names it deleted. Deleting a namespace deletes the veth ends in it.
func Sweep() []string {
	entries, err := os.ReadDir(NetnsDir)
	if err != nil {
		return nil
	}
	var swept []string
	for _, e := range entries {
		p, ok := ownerPid(e.Name())
		if !ok || p == os.Getpid() || processAlive(p) {
			continue
		}
		if unmountAndRemove(filepath.Join(NetnsDir, e.Name())) == nil {
			swept = append(swept, e.Name())
		}
	}
	return swept
}

// ownerPid extracts the pid from "xk-<pid>-<seq>-<tag>".
func ownerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(num)
	if err != nil || p <= 0 {
		return 0, false
	}
	return p, true
}

// processAlive reports whether pid exists. EPERM means it exists but
// belongs to someone else.
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
