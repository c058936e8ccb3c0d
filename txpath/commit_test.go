package txpath

import (
	"errors"
	"testing"
)

// TestCommitErrorLeaksNothing: a Commit that fails gives its frame back,
// so a caller that forgets to Release leaks nothing; Release afterwards
// says the frame is no longer reserved.
func TestCommitErrorLeaksNothing(t *testing.T) {
	s, _ := newFake(t, fakeCfg{})
	for i := 0; i < 3*cap(s.held); i++ { // more than a batch of frames
		f, err := s.Next()
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		n := copy(f.Buf, []byte("not a packet"))
		if err := s.Commit(f, n, Options{Checksum: true}); !errors.Is(err, ErrBadPacket) {
			t.Fatalf("Commit of a bad packet: %v", err)
		}
		if len(s.held) != 0 {
			t.Fatalf("after a failed Commit %d frames stay reserved", len(s.held))
		}
	}
	f, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(f, 0, Options{}); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("Commit of 0 bytes: %v", err)
	}
	if err := s.Release(f); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("Release after a failed Commit: %v, want ErrBadFrame", err)
	}
	if a := s.u.Accounting(); a.Held != len(s.cache) {
		t.Fatalf("accounting %s: %d frames held beyond the Sender's cache of %d", a, a.Held-len(s.cache), len(s.cache))
	}
}
