package txpath

import "testing"

// queueN reserves and commits n 60-byte frames.
func queueN(t *testing.T, s *Sender, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		f, err := s.Next()
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		if err := s.Commit(f, 60, Options{}); err != nil {
			t.Fatalf("Commit %d: %v", i, err)
		}
	}
}

// TestFlushCompletionRingFull: a copy-mode kick that stops at a full
// completion ring without saying so (older kernels' copy mode) leaves
// descriptors on the TX ring; Flush reaps and kicks again until the ring
// is empty, so that none waits for the next send.
func TestFlushCompletionRingFull(t *testing.T) {
	s, p := newFake(t, fakeCfg{ring: 128, cfg: Config{BatchSize: 64}})
	p.compCap, p.quietFull = 16, true
	queueN(t, s, 64)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := p.txPending(); n != 0 {
		t.Errorf("%d descriptors left on the TX ring after Flush (completion ring of %d)", n, p.compCap)
	}
	if st := s.Stats(); st.Completed != 64 || s.InFlight() != 0 {
		t.Errorf("completed %d, in flight %d; want 64 and 0", st.Completed, s.InFlight())
	}
}

// TestFlushZeroCopyKicksOnce: a zero-copy driver sends after the kick
// returns, so descriptors still on the ring then are not left behind:
// a kick that does not answer EAGAIN is not repeated.
func TestFlushZeroCopyKicksOnce(t *testing.T) {
	s, p := newFake(t, fakeCfg{ring: 128, zc: true, cfg: Config{BatchSize: 64, Policy: Plain}})
	p.hold = true // the "driver" takes nothing during the call
	queueN(t, s, 32)
	kicks := p.kicks
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := p.kicks - kicks; got != 1 {
		t.Errorf("Flush kicked %d times, want 1", got)
	}
	p.hold = false
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestFlushIdleKicks: descriptors a busy device refused stay on the TX
// ring after Flush (its kicks are bounded); a Flush with nothing queued,
// as a poll loop makes at the end of an idle round, kicks again and
// sends them.
func TestFlushIdleKicks(t *testing.T) {
	s, p := newFake(t, fakeCfg{ring: 128, cfg: Config{BatchSize: 64}})
	p.hold = true
	queueN(t, s, 20)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := p.txPending(); n != 20 {
		t.Fatalf("a held device took descriptors: %d pending, want 20", n)
	}
	if s.Queued() != 0 {
		t.Fatalf("%d descriptors queued, want all on the ring", s.Queued())
	}
	p.hold = false
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := p.txPending(); n != 0 || s.InFlight() != 0 {
		t.Errorf("after an idle Flush: %d pending on the ring, %d in flight; want 0 and 0", n, s.InFlight())
	}
}
