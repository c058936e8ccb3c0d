package netdev

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"

	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestParseNAPI(t *testing.T) {
	reply := cat(
		attr(netdevAttrNAPIID, u32(8193)),
		attr(netdevAttrNAPIIfindex, u32(7)),
		attr(netdevAttrNAPIPID, u32(1234)),
		attr(netdevAttrNAPIDeferHardIRQs, u32(3)),
		attr(netdevAttrNAPIGROFlushTimeout, u32(200000)),       // nla_put_uint: 4 bytes when it fits
		attr(netdevAttrNAPIIRQSuspendTimeout, u64(5000000000)), // and 8 when it does not
		attr(99, []byte{1}),
	)
	n, err := parseNAPI(reply)
	if err != nil {
		t.Fatal(err)
	}
	want := NAPI{ID: 8193, Ifindex: 7, IRQ: -1, PID: 1234, DeferHardIRQs: 3,
		GROFlushTimeout: 200 * time.Microsecond, IRQSuspendTimeout: 5 * time.Second, HasIRQSuspendTimeout: true}
	if n != want {
		t.Errorf("parsed %+v\nwant   %+v", n, want)
	}
	if _, err := parseNAPI(attr(netdevAttrNAPIIfindex, u32(7))); err == nil {
		t.Error("reply without id accepted")
	}
	if _, err := parseNAPI(cat(attr(netdevAttrNAPIID, u32(1)), attr(netdevAttrNAPIGROFlushTimeout, []byte{1, 2}))); err == nil {
		t.Error("2-byte uint accepted")
	}

	q, err := parseQueue(genetlink.Message{Data: cat(
		attr(netdevAttrQueueID, u32(2)), attr(netdevAttrQueueIfindex, u32(7)),
		attr(netdevAttrQueueType, u32(uint32(QueueTX))), attr(netdevAttrQueueNAPIID, u32(8193)))})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Queue{ID: 2, Type: QueueTX, Ifindex: 7, NAPIID: 8193}); q != want {
		t.Errorf("parsed %+v, want %+v", q, want)
	}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestNAPI lists, sets, reads back and restores the NAPI settings of a
// veth, which polls one NAPI per RX queue while it has an XDP program.
// 96 queues make both dumps longer than one netlink datagram.
func TestNAPI(t *testing.T) {
	vethns.Require(t)
	const queues = 96
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: queues})

	napisOf := func() []NAPI {
		t.Helper()
		var napis []NAPI
		if err := a.Do(func() (err error) { napis, err = NAPIs(p.A.Index); return err }); err != nil {
			t.Fatal(err)
		}
		return napis
	}
	// Older kernels answer ErrUnsupported, which is all there is to test
	// there: napi-get and queue-get are Linux 6.8, napi-set 6.13,
	// irq-suspend-timeout 6.14. A distribution kernel with the calls
	// backported takes the full test.
	if err := a.Do(func() error { _, err := NAPIs(p.A.Index); return err }); errors.Is(err, errors.ErrUnsupported) {
		if !vethns.KernelBefore(6, 8) {
			t.Fatalf("NAPIs on Linux 6.8+: %v", err)
		}
		t.Logf("NAPIs: %v (Linux before 6.8)", err)
		return
	}
	if n := napisOf(); len(n) != 0 {
		t.Errorf("veth without XDP: %d NAPIs, want none", len(n))
	}

	attachPass(t, p.A)

	napis := napisOf()
	if len(napis) != queues {
		t.Fatalf("veth with XDP on %d queues: %d NAPIs", queues, len(napis))
	}
	ids := map[uint32]bool{}
	for _, n := range napis {
		if n.ID == 0 || ids[n.ID] || n.Ifindex != p.A.Index || n.IRQ != -1 || n.PID != 0 {
			t.Errorf("NAPI %+v: want a unique id, ifindex %d, no IRQ, no thread", n, p.A.Index)
		}
		ids[n.ID] = true
		if !n.HasIRQSuspendTimeout && !vethns.KernelBefore(6, 14) {
			t.Errorf("NAPI %d: no irq-suspend-timeout on Linux 6.14+", n.ID)
		}
	}

	// queue-get: every RX and TX queue, once.
	var qs []Queue
	if err := a.Do(func() (err error) { qs, err = Queues(p.A.Index); return err }); err != nil {
		t.Fatal(err)
	}
	seen := map[Queue]bool{}
	for _, q := range qs {
		if q.Ifindex != p.A.Index || q.ID < 0 || q.ID >= queues || (q.Type != QueueRX && q.Type != QueueTX) || (q.NAPIID != 0 && !ids[q.NAPIID]) {
			t.Errorf("queue %+v", q)
		}
		seen[Queue{ID: q.ID, Type: q.Type}] = true
	}
	if len(qs) != 2*queues || len(seen) != 2*queues {
		t.Errorf("%d queues (%d distinct), want %d rx and %d tx", len(qs), len(seen), queues, queues)
	}

	// Set, read back, set one field only, restore.
	orig := napis[len(napis)/2]
	byID := func(id uint32) NAPI {
		t.Helper()
		for _, n := range napisOf() {
			if n.ID == id {
				return n
			}
		}
		t.Fatalf("NAPI %d gone", id)
		return NAPI{}
	}
	if err := a.Do(func() error { return SetNAPI(orig.ID, NAPISettings{DeferHardIRQs: &orig.DeferHardIRQs}) }); errors.Is(err, errors.ErrUnsupported) {
		if !vethns.KernelBefore(6, 13) {
			t.Fatalf("SetNAPI on Linux 6.13+: %v", err)
		}
		t.Logf("SetNAPI: %v (Linux before 6.13)", err)
		return
	}
	// Linux 6.13 has the other two settings only.
	hasSusp := orig.HasIRQSuspendTimeout
	if !hasSusp {
		susp := time.Millisecond
		if err := a.Do(func() error { return SetNAPI(orig.ID, NAPISettings{IRQSuspendTimeout: &susp}) }); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("SetNAPI(irq-suspend-timeout) on a kernel without it: %v, want ErrUnsupported", err)
		}
	}
	all := func(d uint32, g, su time.Duration) NAPISettings {
		s := NAPISettings{DeferHardIRQs: &d, GROFlushTimeout: &g}
		if hasSusp {
			s.IRQSuspendTimeout = &su
		}
		return s
	}
	set := func(s NAPISettings) {
		t.Helper()
		if err := a.Do(func() error { return SetNAPI(orig.ID, s) }); err != nil {
			t.Fatal(err)
		}
	}
	defer set(all(orig.DeferHardIRQs, orig.GROFlushTimeout, orig.IRQSuspendTimeout))
	defer_, gro, susp := uint32(7), 300*time.Microsecond, 20*time.Millisecond
	set(all(defer_, gro, susp))
	want := orig
	want.DeferHardIRQs, want.GROFlushTimeout = defer_, gro
	if hasSusp {
		want.IRQSuspendTimeout = susp
	}
	if got := byID(orig.ID); got != want {
		t.Errorf("after SetNAPI: %+v\nwant %+v", got, want)
	}
	other := napis[0]
	if got := byID(other.ID); got != other {
		t.Errorf("another NAPI changed: %+v, was %+v", got, other)
	}
	defer_ = 2
	set(NAPISettings{DeferHardIRQs: &defer_})
	want.DeferHardIRQs = 2
	if got := byID(orig.ID); got != want {
		t.Errorf("after setting defer-hard-irqs only: %+v\nwant %+v", got, want)
	}
	set(all(orig.DeferHardIRQs, orig.GROFlushTimeout, orig.IRQSuspendTimeout))
	if got := byID(orig.ID); got != orig {
		t.Errorf("after restoring: %+v\nwant %+v", got, orig)
	}

	// Errors.
	err := a.Do(func() error {
		// NAPI ids come from one counter of the whole host; in this
		// namespace the veth's are the only ones, and an id above them
		// all is not (yet) anyone's.
		var missing uint32
		for id := range ids {
			missing = max(missing, id)
		}
		missing++
		if err := SetNAPI(missing, NAPISettings{DeferHardIRQs: &defer_}); !errors.Is(err, ErrNoNAPI) {
			t.Errorf("SetNAPI(unknown id): %v, want ErrNoNAPI", err)
		} else {
			t.Logf("SetNAPI(unknown id): %v", err)
		}
		big := uint32(math.MaxInt32 + 1)
		if err := SetNAPI(orig.ID, NAPISettings{DeferHardIRQs: &big}); err == nil {
			t.Error("SetNAPI with defer-hard-irqs above S32_MAX accepted")
		}
		neg := -time.Second
		if err := SetNAPI(orig.ID, NAPISettings{GROFlushTimeout: &neg}); err == nil {
			t.Error("SetNAPI with a negative timeout accepted")
		}
		if _, err := NAPIs(p.A.Index + 1000); !errors.Is(err, ErrNoDevice) {
			t.Errorf("NAPIs(missing ifindex): %v, want ErrNoDevice", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestUnsupportedError(t *testing.T) {
	err := error(&UnsupportedError{Feature: "napi-set", Kernel: "6.13", Err: errFamilyMissing})
	if !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, errFamilyMissing) {
		t.Errorf("%v: want errors.ErrUnsupported and the kernel's answer", err)
	}
	if got := err.Error(); got != `netdev: napi-set needs Linux 6.13: generic netlink family "netdev" not present` {
		t.Errorf("Error() = %q", got)
	}
}
