package vethns

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/vishvananda/netns"

	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// childAttachAndHang runs when the test binary is started by
// TestSIGKILLDetaches with XK_CHILD_NS set: it attaches the XDP program,
// binds queue 0, says "ready" and waits to be killed.
func childAttachAndHang(nsPath, ifname string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	runtime.LockOSThread()
	h, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fail(err)
	}
	if err := netns.Set(h); err != nil {
		return fail(err)
	}
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 256})
	if err != nil {
		return fail(err)
	}
	prog, err := xsk.AttachProgram(ifname, nil)
	if err != nil {
		return fail(err)
	}
	s, err := xsk.New(ifname, 0, u, nil)
	if err != nil {
		return fail(err)
	}
	if err := prog.Register(s); err != nil {
		return fail(err)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute) // killed long before
	return 1
}
