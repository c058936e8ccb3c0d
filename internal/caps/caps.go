package caps

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Capabilities that xdpkit's operations need.
const (
	NetAdmin = "CAP_NET_ADMIN" // attach XDP programs, bind to a queue, busy-poll options
	NetRaw   = "CAP_NET_RAW"   // create an AF_XDP socket
	BPF      = "CAP_BPF"       // load the XDP program and its maps
	IPCLock  = "CAP_IPC_LOCK"  // pin UMEM memory beyond RLIMIT_MEMLOCK
)

// Error is a permission failure together with the capability that would
// have allowed the operation. It unwraps to the errno, so
// errors.Is(err, os.ErrPermission) holds for EPERM and EACCES.
type Error struct {
	Op  string // the operation, e.g. "socket(AF_XDP)"
	Cap string // the missing capability, e.g. CAP_NET_RAW
	Err error  // the underlying error, usually a syscall.Errno
}

// Error names the operation and the missing capability.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %v (needs %s)", e.Op, e.Err, e.Cap)
}

// Unwrap returns the underlying error, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// Public makes the public form of a capability error (package xsk sets
// it to build an *xsk.CapabilityError), so that errors.As finds the
// public type in the errors of the packages that xsk builds on.
var Public func(op, cap string, err error) error

// As lets errors.As find the public form of e (see Public).
func (e *Error) As(target any) bool {
	if Public == nil {
		return false
	}
	return errors.As(Public(e.Op, e.Cap, e.Err), target)
}

// Errno returns the errno that err wraps, without the text the layers in
// between added (cilium/ebpf adds a hint about RLIMIT_MEMLOCK to every
// EPERM, which misleads on kernels that account BPF memory to the memory
// cgroup, 5.11 and later); err itself when it wraps none.
func Errno(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// Is makes every capability error match os.ErrPermission, also when the
// kernel said something else (ENOBUFS for memory beyond RLIMIT_MEMLOCK).
func (e *Error) Is(target error) bool { return target == os.ErrPermission }

// Wrap returns err annotated with cap when err is EPERM or EACCES, and err
// wrapped with op otherwise. A nil err stays nil.
func Wrap(op, cap string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return &Error{Op: op, Cap: cap, Err: Errno(err)}
	}
	return fmt.Errorf("%s: %w", op, err)
}
