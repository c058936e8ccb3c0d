package apps_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// genRun is the part of xdpgen's summary these tests read.
type genRun struct {
	Sent, Completed, Frames, NotCompleted uint64
	Seconds                               float64
	ZeroCopy                              bool
}

// TestGenDurationAfterSetup: -duration is the time xdpgen sends, counted
// from the end of its set-up (binding, which takes seconds in zero-copy
// mode on some NICs): the summary's Seconds, measured from there, is at
// least -duration.
func TestGenDurationAfterSetup(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	const d = time.Second
	stdout, stderr, code := runIn(t, a, 60*time.Second, "xdpgen", "-i", p.A.Name, "-dst", p.B.IPv4.Addr().String(),
		"-rate", "2k", "-duration", d.String(), "-quiet")
	if code != 0 {
		t.Fatalf("xdpgen: exit %d: %s%s", code, stdout, stderr)
	}
	var gs genRun
	if err := cli.ParseSummary(stdout, &gs); err != nil {
		t.Fatal(err)
	}
	t.Logf("xdpgen -duration %v: sent %d in %.3f s", d, gs.Sent, gs.Seconds)
	if gs.Seconds < d.Seconds() {
		t.Errorf("xdpgen -duration %v sent for %.4f s: the clock started before the end of set-up", d, gs.Seconds)
	}
	if gs.Sent == 0 || gs.Completed != gs.Sent || gs.NotCompleted != 0 {
		t.Errorf("sent %d, completed %d, not completed %d", gs.Sent, gs.Completed, gs.NotCompleted)
	}
}

// TestGenStall: xdpgen on a device whose frames never complete reports
// it and exits non-zero, never a silent success. The device is a macvlan
// over a veth whose token bucket (tbf, 500 bytes/s: a 1514-byte frame
// every 3 s) holds the frames: copy mode's sendto succeeds, and a frame's
// completion comes only when the qdisc lets its skb go. Once with frames
// to spare (the last frames are not completed within -stall after the
// run), once with fewer frames than -count (the send loop waits for
// completions that do not come and its watchdog ends it after -stall).
func TestGenStall(t *testing.T) {
	vethns.Require(t)
	for _, tc := range []struct {
		name   string
		count  int
		frames string
		want   string
	}{
		{"drain", 200, "4096", "not completed within -stall"},
		{"loop", 2000, "256", "TX stalled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := vethns.NewNS(t), vethns.NewNS(t)
			p := vethns.NewPair(t, a, b, nil)
			mv := p.A.Name + "m"
			if err := a.Do(func() error {
				veth, err := netlink.LinkByName(p.A.Name)
				if err != nil {
					return err
				}
				// The kernel caps the bucket at 2^32 ns (4.29 s): the
				// burst must pass at the rate within that, and hold a
				// 1514-byte frame. One frame per 3 s then.
				const rate, burst = 500, 1600 // bytes per second, bytes
				if err := netlink.QdiscAdd(&netlink.Tbf{
					QdiscAttrs: netlink.QdiscAttrs{LinkIndex: veth.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
					Rate:       rate, Limit: 1 << 20, Buffer: netlink.Xmittime(rate, burst),
				}); err != nil {
					return fmt.Errorf("tbf qdisc on %s (sch_tbf): %w", p.A.Name, err)
				}
				m := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: mv, ParentIndex: veth.Attrs().Index}, Mode: netlink.MACVLAN_MODE_PRIVATE}
				if err := netlink.LinkAdd(m); err != nil {
					return fmt.Errorf("macvlan on %s: %w", p.A.Name, err)
				}
				return netlink.LinkSetUp(m)
			}); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			stdout, stderr, code := runIn(t, a, 120*time.Second, "xdpgen", "-i", mv, "-src", p.A.IPv4.Addr().String(),
				"-dst", p.B.IPv4.Addr().String(), "-dst-mac", p.B.MAC.String(), "-count", fmt.Sprint(tc.count),
				"-frames", tc.frames, "-rate", "20k", "-size", "1514", "-stall", "1s", "-quiet")
			t.Logf("xdpgen exit %d after %v: %s%s", code, time.Since(began).Round(time.Millisecond), stdout, stderr)
			var gs genRun
			if err := cli.ParseSummary(stdout, &gs); err != nil {
				t.Fatal(err)
			}
			if code != cli.ExitError || !strings.Contains(stderr, tc.want) {
				t.Errorf("xdpgen whose frames are held: exit %d, stderr %q; want exit %d and %q", code, stderr, cli.ExitError, tc.want)
			}
			if gs.NotCompleted == 0 || gs.Completed+gs.NotCompleted != gs.Frames {
				t.Errorf("summary: frames %d, completed %d, not completed %d", gs.Frames, gs.Completed, gs.NotCompleted)
			}
		})
	}
}
