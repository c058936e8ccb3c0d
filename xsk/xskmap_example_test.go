package xsk_test

import (
	"log"

	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

// Your own XDP program keeps its XSKMAP pinned (by libxdp, bpftool or
// cilium/ebpf's Map.Pin); xdpkit puts its socket in it. examples/ownprog
// does the same with a *ebpf.Map and xsk.UseMap.
func ExampleLoadPinnedMap() {
	u, err := umem.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close()
	sock, err := xsk.New("eth0", 0, u, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	xsks, err := xsk.LoadPinnedMap("/sys/fs/bpf/xsks_map")
	if err != nil {
		log.Fatal(err) // xsk.ErrMapType if it is not an XSKMAP
	}
	defer xsks.Close()
	if err := xsks.Register(sock); err != nil {
		log.Fatal(err) // xsk.ErrMapRange if queue 0 does not fit
	}
	defer xsks.Unregister(sock)
	// Receive as usual: rxpath.New(nil, sock) ...
}
