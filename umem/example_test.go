package umem_test

import (
	"fmt"
	"log"

	"github.com/xdpkit/xdpkit/umem"
)

// A UMEM's frames are named by their address; the allocator hands them
// out and takes them back, and Accounting says where every frame is.
func Example() {
	u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 1024})
	if err != nil {
		log.Fatal(err) // needs CAP_NET_RAW (and CAP_IPC_LOCK beyond RLIMIT_MEMLOCK)
	}
	defer u.Close()

	addrs := make([]uint64, 64)
	n := u.GetBatch(addrs)
	frame := u.Frame(addrs[0]) // the frame's memory, to write a packet into
	copy(frame, "a packet")
	fmt.Println(u.Accounting()) // 64 held by us
	if err := u.PutBatch(addrs[:n]); err != nil {
		log.Fatal(err)
	}
	fmt.Println(u.Accounting())
}
