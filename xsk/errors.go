package xsk

import (
	"errors"

	"github.com/xdpkit/xdpkit/internal/caps"
)

// Errors returned by New. Match them with errors.Is; the returned error
// wraps the system call's errno as well.
var (
	ErrRingSize     = errors.New("xsk: ring size must be a power of two between 1 and 1<<20")
	ErrNoDevice     = errors.New("xsk: no such network interface")
	ErrQueue        = errors.New("xsk: queue does not exist on the interface")
	ErrBusy         = errors.New("xsk: queue already has an AF_XDP socket")
	ErrNotSupported = errors.New("xsk: not supported")
	ErrNoRing       = errors.New("xsk: socket has no such ring")
)

// CapabilityError is a permission failure that names the missing
// capability (CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF, CAP_IPC_LOCK). It
// unwraps to the errno, so errors.Is(err, os.ErrPermission) holds too.
type CapabilityError = caps.Error
