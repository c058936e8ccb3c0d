package rxpath

import (
	"testing"

	"github.com/xdpkit/xdpkit/xsk"
)

// TestTouchFirst checks Config.Prefetch's reads: the first byte of every
// buffer inside the UMEM, none outside it.
func TestTouchFirst(t *testing.T) {
	mem := make([]byte, 2*4096)
	mem[0], mem[4096+256], mem[100], mem[1] = 1, 2, 4, 64
	descs := []xsk.Desc{
		{Addr: 0, Len: 60},
		{Addr: 4096 + 256, Len: 1500},
		{Addr: 100, Len: 60},
		{Addr: uint64(len(mem)), Len: 60}, // one past the end: not read
		{Addr: 1 << 40, Len: 60},          // far outside: not read
	}
	if got, want := touchFirst(mem, descs), byte(1+2+4); got != want {
		t.Errorf("touchFirst = %d, want %d (the first byte of each buffer inside the UMEM)", got, want)
	}
	if got := touchFirst(mem, nil); got != 0 {
		t.Errorf("touchFirst of no descriptors = %d, want 0", got)
	}
}
