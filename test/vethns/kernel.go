package vethns

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// KernelBefore reports whether the running kernel is older than
// major.minor, from uname(2)'s release (false when it cannot be read). A
// test uses it to accept a documented fallback on an older kernel; on a
// distribution kernel with backports the feature probe, not the version,
// is what the library itself trusts.
func KernelBefore(major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma < major || ma == major && mi < minor
}

// RequireKernel skips tb, naming what needs it, on a kernel older than
// major.minor; with CI=true it fails instead (CI runs on a kernel that has
// everything the tests use).
func RequireKernel(tb testing.TB, major, minor int, what string) {
	tb.Helper()
	if !KernelBefore(major, minor) {
		return
	}
	msg := fmt.Sprintf("needs Linux %d.%d (%s)", major, minor, what)
	if InCI() {
		tb.Fatal(msg + " [CI=true: failing instead of skipping]")
	}
	tb.Skip(msg)
}
