package rxpath

import (
	"testing"

	"github.com/xdpkit/xdpkit/xsk"
)

// TestTouchFirst checks Config.Prefetch's reads: one byte of each cache
// line of a packet's first 128 bytes, of every packet whose first buffer
// is inside the UMEM, none beyond the packet, its first 128 bytes or the
// UMEM, none of a multi-buffer packet's later buffers, and no more than
// one per line.
func TestTouchFirst(t *testing.T) {
	mem := make([]byte, 4*4096)
	read := map[int]byte{
		0:     1,  // a 60-byte packet at 0: one line
		4352:  2,  // a 1500-byte packet at 4096+256: its first line
		4416:  4,  // and its second
		100:   8,  // a 60-byte packet at 100: the rest of line 64..127
		128:   16, // and the start of the next line
		16374: 32, // a packet 10 bytes before the end of the UMEM
		8448:  64, // a two-buffer packet's first buffer at 8192+256
	}
	notRead := map[int]byte{
		4480:  128, // the 1500-byte packet's third line, beyond 128 bytes
		64:    128, // the line after the 60-byte packet at 0
		12544: 128, // the two-buffer packet's second buffer at 12288+256
	}
	for _, m := range []map[int]byte{read, notRead} {
		for i, v := range m {
			mem[i] = v
		}
	}
	descs := []xsk.Desc{
		{Addr: 0, Len: 60},
		{Addr: 4096 + 256, Len: 1500},
		{Addr: 8192 + 256, Len: 60, Options: xsk.OptContd}, // goes on in the next buffer
		{Addr: 12288 + 256, Len: 60},                       // its payload: not read
		{Addr: 100, Len: 60},
		{Addr: uint64(len(mem)) - 10, Len: 60}, // runs past the UMEM: its bytes inside only
		{Addr: uint64(len(mem)), Len: 60},      // one past the end: not read
		{Addr: 1 << 40, Len: 60},               // far outside: not read
		{Addr: 1<<64 - 8, Len: 60},             // its end would wrap around: not read
	}
	if got, want := touchFirst(mem, descs), byte(1+2+4+8+16+32+64); got != want {
		t.Errorf("touchFirst = %d, want %d (one byte of each line of a packet's first 128 bytes inside the UMEM)", got, want)
	}
	// One read per line: with every byte 1 the sum counts the reads.
	for i := range mem {
		mem[i] = 1
	}
	if got, want := touchFirst(mem, descs), byte(len(read)); got != want {
		t.Errorf("touchFirst over a UMEM of ones = %d, want %d reads (one per line)", got, want)
	}
	if got := touchFirst(mem, nil); got != 0 {
		t.Errorf("touchFirst of no descriptors = %d, want 0", got)
	}
}
