package xsk

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// RegisterKey puts s in the map at key instead of at its queue index:
// for programs that choose among several sockets of one queue (see
// NewShared) or number sockets their own way. A nil s is refused with
// an error matching os.ErrInvalid.
func (x *Map) RegisterKey(key int, s *Socket) error {
	if s == nil {
		return fmt.Errorf("xsk: register key %d: nil socket: %w", key, os.ErrInvalid)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("xsk: register: %w", os.ErrClosed)
	}
	if err := x.keyInRange(key); err != nil {
		return err
	}
	if !s.g.enter() { // the fd stays open while we hold the guard
		return os.ErrClosed
	}
	defer s.g.exit()
	if err := x.m.Update(uint32(key), uint32(s.fd), ebpf.UpdateAny); err != nil {
		return x.updateError("register", "key", key, err)
	}
	return nil
}

// UnregisterKey removes the socket at key, if there is one.
func (x *Map) UnregisterKey(key int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("xsk: unregister: %w", os.ErrClosed)
	}
	if err := x.keyInRange(key); err != nil {
		return err
	}
	if err := x.m.Delete(uint32(key)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return x.updateError("unregister", "key", key, err)
	}
	return nil
}

func (x *Map) keyInRange(key int) error {
	if key < 0 || uint64(key) >= uint64(x.max) {
		return fmt.Errorf("%w: key %d, max_entries %d", ErrMapRange, key, x.max)
	}
	return nil
}
