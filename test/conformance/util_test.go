package conformance

import (
	"bytes"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

func netIndex(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// umemTailroom is the room the kernel may keep at the end of each chunk
// for a struct skb_shared_info (the kernel suite's umem_tailroom): 48
// bytes and one 16-byte skb_frag_t per net.core.max_skb_frags, rounded
// up to the cache line (64 bytes where sysfs does not say).
func umemTailroom(t *testing.T) uint32 {
	t.Helper()
	frags, err := readUint("/proc/sys/net/core/max_skb_frags")
	if err != nil {
		t.Fatal(err)
	}
	line, err := readUint("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err != nil || line == 0 {
		line = 64
	}
	return uint32((48 + frags*16 + line - 1) / line * line)
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
}

// drainsAfterInvalid reports whether the kernel drops, in copy mode, the
// TX descriptors that follow a dropped multi-buffer packet up to that
// packet's end (the first descriptor without XDP_PKT_CONTD) when the
// descriptor it was dropped at has XDP_PKT_CONTD set. Kernels that do
// have the field drain_cont in struct xdp_sock, which their BTF names;
// the others start a new packet at the next descriptor, as the kernel
// suite expects.
func drainsAfterInvalid(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Fatalf("the kernel's BTF: %v", err)
	}
	return bytes.Contains(b, []byte("\x00drain_cont\x00"))
}
