package umem

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestUnalignedAddr(t *testing.T) {
	a := EncodeAddr(0x12345, 0x1f0)
	if ExtractAddr(a) != 0x12345 || ExtractOffset(a) != 0x1f0 || AddOffsetToAddr(a) != 0x12345+0x1f0 {
		t.Fatalf("EncodeAddr(0x12345, 0x1f0) = %#x: addr %#x offset %#x sum %#x", a, ExtractAddr(a), ExtractOffset(a), AddOffsetToAddr(a))
	}
	if a>>UnalignedOffsetShift != 0x1f0 {
		t.Fatalf("offset not in bits 48-63: %#x", a)
	}
	if AddOffsetToAddr(4096) != 4096 || ExtractAddr(4096) != 4096 {
		t.Fatal("an address without offset changed")
	}
}

func TestFrameSizes(t *testing.T) {
	page := uint32(os.Getpagesize())
	for size := uint32(2048); size <= page; size *= 2 {
		if err := checkFrameSize(size, false); err != nil {
			t.Errorf("aligned %d: %v", size, err)
		}
	}
	for _, size := range []uint32{1024, 3000, 4001, 2 * page} {
		if err := checkFrameSize(size, false); !errors.Is(err, ErrFrameSize) {
			t.Errorf("aligned %d: %v, want ErrFrameSize", size, err)
		}
	}
	for _, size := range []uint32{2048, 3000, 4001, 4096} {
		if err := checkFrameSize(size, true); err != nil {
			t.Errorf("unaligned %d: %v", size, err)
		}
	}
	for _, size := range []uint32{2047, page + 1, 2 * page, 1<<31 + 1, 1<<32 - 1} {
		if err := checkFrameSize(size, true); !errors.Is(err, ErrFrameSize) {
			t.Errorf("unaligned %d: %v, want ErrFrameSize", size, err)
		}
	}
}

// TestNewFrameSizeTooLarge checks that New refuses, and returns, for
// unaligned frame sizes beyond the page size, up to the largest uint32.
func TestNewFrameSizeTooLarge(t *testing.T) {
	for _, size := range []uint32{uint32(os.Getpagesize()) + 1, 1<<31 + 1, 1<<32 - 1} {
		done := make(chan error, 1)
		go func() {
			_, err := New(&Config{FrameSize: size, FrameCount: 1, Unaligned: true})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrFrameSize) {
				t.Errorf("New(unaligned FrameSize %d) = %v, want ErrFrameSize", size, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("New(unaligned FrameSize %d) did not return", size)
		}
	}
}

// TestUnaligned registers a UMEM of 4001-byte chunks (the kernel's own
// odd size) and cycles every frame through the allocator.
func TestUnaligned(t *testing.T) {
	needRoot(t)
	u, err := New(&Config{FrameSize: 4001, FrameCount: 64, Unaligned: true})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if !u.Unaligned() || u.Size() != 4001*64 {
		t.Fatalf("Unaligned %v, Size %d", u.Unaligned(), u.Size())
	}
	seen := map[uint64]bool{}
	for {
		a, ok := u.Get()
		if !ok {
			break
		}
		if a%4001 != 0 || a >= u.Size() || seen[a] {
			t.Fatalf("Get = %#x: not a fresh frame start", a)
		}
		seen[a] = true
	}
	if len(seen) != 64 {
		t.Fatalf("got %d frames, want 64", len(seen))
	}
	// A packet may cross a chunk boundary.
	if _, ok := u.Data(4001-10, 64); !ok {
		t.Error("Data across a chunk boundary refused in an unaligned UMEM")
	}
	if _, ok := u.Data(u.Size()-10, 64); ok {
		t.Error("Data past the end of the UMEM accepted")
	}
	for a := range seen {
		// An RX address with its offset still frees its frame.
		if err := u.Put(EncodeAddr(a, 256)); err != nil {
			t.Fatal(err)
		}
	}
	if ac := u.Accounting(); ac.Free != 64 {
		t.Fatalf("after Put: %v", ac)
	}
}
