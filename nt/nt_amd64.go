//go:build amd64 && gc && !purego

package nt

import "golang.org/x/sys/cpu"

// Feature flags, read once from CPUID at start-up. Tests switch them to force
// each implementation in turn; the widest one present wins.
var (
	hasAVX512 = cpu.X86.HasAVX512F
	hasAVX2   = cpu.X86.HasAVX2
)

// Supported reports whether Copy uses nontemporal stores in this build. It is
// false under the purego tag and on architectures other than amd64, where
// Copy is the builtin copy and Fence does nothing.
const Supported = true

// ntAVX512, ntAVX2 and ntSSE2 store n bytes from src to dst with
// nontemporal stores. dst must be 64-byte aligned and n a positive multiple
// of 64; src may have any alignment. They do not fence.

//go:noescape
func ntAVX512(dst, src *byte, n int)

//go:noescape
func ntAVX2(dst, src *byte, n int)

//go:noescape
func ntSSE2(dst, src *byte, n int)

// Fence orders every nontemporal store issued before it by this goroutine's
// thread before every store that follows it (SFENCE). Call it once per batch
// of Copy calls, before the data is published to another core or to a device:
// for AF_XDP, before the TX ring's producer index is stored.
//
//go:noescape
func Fence()

// copyNT copies len(src) bytes (len(dst) == len(src), no overlap): ordinary
// stores for the head up to the first 64-byte boundary of dst and for the
// tail after the last one, nontemporal stores for the whole lines between.
func copyNT(dst, src []byte) {
	n := len(src)
	h := headLen(dst)
	if n-h < 64 {
		copy(dst, src)
		return
	}
	body := (n - h) &^ 63
	copy(dst[:h], src[:h])
	switch {
	case hasAVX512:
		ntAVX512(&dst[h], &src[h], body)
	case hasAVX2:
		ntAVX2(&dst[h], &src[h], body)
	default:
		ntSSE2(&dst[h], &src[h], body)
	}
	copy(dst[h+body:], src[h+body:])
}

// implName names the implementation the flags select.
func implName() string {
	switch {
	case hasAVX512:
		return "avx512"
	case hasAVX2:
		return "avx2"
	default:
		return "sse2"
	}
}
