package xsk

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/xdpkit/xdpkit/internal/caps"
	"github.com/xdpkit/xdpkit/internal/xdpprog"
)

// Errors returned by New and AttachProgram. Match them with errors.Is; the
// returned error wraps the system call's errno as well.
var (
	ErrRingSize = errors.New("xsk: ring size must be a power of two between 1 and 1<<20")
	ErrNoDevice = errors.New("xsk: no such network interface")
	ErrQueue    = errors.New("xsk: queue does not exist on the interface")
	// ErrBusy: New found the queue taken by another AF_XDP socket, or
	// AttachProgram found another XDP program on the interface.
	ErrBusy         = errors.New("xsk: queue already has an AF_XDP socket")
	ErrNotSupported = errors.New("xsk: not supported")
	ErrNoRing       = errors.New("xsk: socket has no such ring")
)

// CapabilityError is a permission failure that names the missing
// capability. It is what New, AttachProgram and umem.New return when the
// kernel answers EPERM or EACCES (or ENOBUFS for a UMEM beyond
// RLIMIT_MEMLOCK without CAP_IPC_LOCK); find it with errors.As. It
// matches os.ErrPermission with errors.Is, and unwraps to the errno.
type CapabilityError struct {
	Op  string // the operation, e.g. "xsk: socket(AF_XDP)"
	Cap string // the missing capability, e.g. "CAP_NET_RAW", or "CAP_BPF and CAP_NET_ADMIN"
	Err error  // the underlying error, usually a syscall.Errno
}

// Error names the operation and the missing capability.
func (e *CapabilityError) Error() string {
	return fmt.Sprintf("%s: %v (needs %s)", e.Op, e.Err, e.Cap)
}

// Unwrap returns the system call's error, which matches os.ErrPermission.
func (e *CapabilityError) Unwrap() error { return e.Err }

// Is makes every capability error match os.ErrPermission, also when the
// kernel said something else (ENOBUFS for memory beyond RLIMIT_MEMLOCK).
func (e *CapabilityError) Is(target error) bool { return target == os.ErrPermission }

func init() {
	// The internal packages (umem's, xdpprog's) make their own capability
	// errors; errors.As turns them into this one.
	caps.Public = func(op, cap string, err error) error {
		return &CapabilityError{Op: op, Cap: cap, Err: err}
	}
}

// busyError is an attach refused because the interface has another XDP
// program: it matches ErrBusy and says what the kernel said.
type busyError struct{ err error }

func (e *busyError) Error() string        { return e.err.Error() }
func (e *busyError) Unwrap() error        { return e.err }
func (e *busyError) Is(target error) bool { return target == ErrBusy }

// attachError gives an error of package xdpprog the shape of this
// package's errors.
func attachError(err error) error {
	if errors.Is(err, xdpprog.ErrBusy) {
		return &busyError{err}
	}
	var ce *xdpprog.CapabilityError
	if errors.As(err, &ce) {
		return &CapabilityError{Op: "xsk: " + ce.Op, Cap: strings.Join(ce.Caps, " and "), Err: caps.Errno(ce.Err)}
	}
	return err
}
