package xsk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/umem"
)

func taiNS(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_TAI, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestTxTimestamps: a copy-mode socket on veth (Linux 6.8+) gets a
// software completion timestamp (CLOCK_TAI, between the send and the
// completion) for each frame that asks for one, and the kernel leaves the
// completion field of the others alone; launch time is not supported on
// veth, and neither is anything without a TX metadata area.
func TestTxTimestamps(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	var noMeta error
	err := a.Do(func() error {
		u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 64, TxMetadataLen: umem.TxMetadataSize})
		if errors.Is(err, umem.ErrNotSupported) {
			noMeta = err
			return nil
		}
		if err != nil {
			return err
		}
		defer u.Close()
		s, err := New(p.A.Name, 0, u, &Config{NoRX: true, TXSize: 64, CompletionSize: 64})
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.TxTimestamps(); err != nil {
			return fmt.Errorf("TxTimestamps on a copy-mode socket: %w", err)
		}
		err = s.LaunchTime()
		var fe *FeatureError
		if !errors.Is(err, ErrNotSupported) || !errors.As(err, &fe) {
			t.Errorf("LaunchTime on veth: %v, want a *FeatureError matching ErrNotSupported", err)
		}
		t.Logf("LaunchTime: %v", err)

		const n = 16
		const sentinel = 0x5a5a5a5a5a5a5a5a
		addrs := make([]uint64, n)
		if got := u.GetBatch(addrs); got != n {
			return fmt.Errorf("got %d frames", got)
		}
		descs := make([]Desc, n)
		for i, base := range addrs {
			addr := base + uint64(u.TxMetadataLen())
			f := u.Frame(addr)[:64]
			copy(f, p.B.MAC)
			copy(f[6:], p.A.MAC)
			binary.BigEndian.PutUint16(f[12:], 0x88b5) // local experimental EtherType: the peer drops it
			md := u.TxMetadataAt(addr)
			*md = umem.TxMetadata{}
			if i%2 == 0 {
				if !RequestTxTimestamp(u, addr) {
					return fmt.Errorf("RequestTxTimestamp(%#x) = false", addr)
				}
			} else {
				binary.NativeEndian.PutUint64(u.Bytes()[base+txTimestampOff:], sentinel)
			}
			descs[i] = Desc{Addr: addr, Len: 64, Options: OptTxMetadata}
		}
		t0 := taiNS(t)
		if got := s.TX().Produce(descs); got != n {
			return fmt.Errorf("produced %d of %d", got, n)
		}
		done := make([]uint64, 0, n)
		buf := make([]uint64, n)
		for deadline := time.Now().Add(5 * time.Second); len(done) < n; {
			if err := s.KickTX(); err != nil {
				return err
			}
			c := s.Completion().Consume(buf)
			done = append(done, buf[:c]...)
			if c == 0 {
				if time.Now().After(deadline) {
					return fmt.Errorf("%d of %d completed", len(done), n)
				}
				time.Sleep(time.Millisecond)
			}
		}
		t1 := taiNS(t)
		stamped := 0
		for _, addr := range done {
			i := -1
			for j, d := range descs {
				if d.Addr == addr {
					i = j
				}
			}
			if i < 0 {
				return fmt.Errorf("completion of %#x, which was not sent", addr)
			}
			ts, ok := TxTimestamp(u, addr)
			if i%2 == 0 {
				if !ok || ts < t0 || ts > t1 {
					t.Errorf("frame %d: TxTimestamp = %d, %v; want within [%d, %d]", i, ts, ok, t0, t1)
				}
				stamped++
			} else {
				if ok {
					t.Errorf("frame %d (no request): TxTimestamp = %d, true", i, ts)
				}
				if v := binary.NativeEndian.Uint64(u.Bytes()[u.Base(addr)+txTimestampOff:]); v != sentinel {
					t.Errorf("frame %d (no request): completion field %#x, the kernel wrote it", i, v)
				}
			}
		}
		if stamped != n/2 {
			t.Errorf("%d stamped completions, want %d", stamped, n/2)
		}
		if err := u.PutBatch(done); err != nil {
			return err
		}

		// Without a TX metadata area there is nothing to ask with.
		if err := s.Close(); err != nil { // its queue is the one free
			return err
		}
		u2, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 64})
		if err != nil {
			return err
		}
		defer u2.Close()
		s2, err := New(p.A.Name, 0, u2, &Config{NoRX: true})
		if err != nil {
			return err
		}
		defer s2.Close()
		for _, err := range []error{s2.TxTimestamps(), s2.LaunchTime()} {
			if !errors.Is(err, ErrNotSupported) {
				t.Errorf("without a TX metadata area: %v, want ErrNotSupported", err)
			}
		}
		return nil
	})
	if noMeta != nil {
		vethns.NotApplicable(t, "XDP_UMEM_TX_METADATA_LEN", "completion timestamps need a TX metadata area: "+noMeta.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
}
