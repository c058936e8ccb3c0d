package vethns

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode"
)

// namePrefix starts every namespace name this package creates,
// "xk-<pid>-<seq>-<tag>"; Sweep relies on it.
const namePrefix = "xk-"

// maxIfName is IFNAMSIZ-1.
const maxIfName = 15

var seq atomic.Uint32

// nextSeq returns the process-wide sequence number shared by namespace
// names, interface names and address blocks.
func nextSeq() uint32 { return seq.Add(1) }

// tagOf turns a test or program name into a short tag of lower-case
// letters and digits, at most 12 bytes ("TestTopology/pair" -> "topologypair").
func tagOf(s string) string {
	s = strings.TrimPrefix(s, "Test")
	var b strings.Builder
	for _, r := range s {
		if b.Len() == 12 {
			break
		}
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

// ifNames returns the names of both ends of the pair with sequence n:
// "xk<pid base 36>-<n base 36>a" and "...b". A pid is below 2^22, at most 5
// base-36 digits, so the names fit in 15 bytes while n < 36^6.
func ifNames(pid int, n uint32) (a, b string) {
	base := "xk" + strconv.FormatInt(int64(pid), 36) + "-" + strconv.FormatUint(uint64(n), 36)
	if len(base)+1 > maxIfName {
		base = base[:maxIfName-1]
	}
	return base + "a", base + "b"
}

// pairAddrs returns the addresses of the two ends of the pair with
// sequence n in a process with the given pid:
//
//   - IPv4: the /30 block (pid mod 128)<<8 | (n mod 256) of the 32768
//     blocks in 198.18.0.0/15, ends .1 and .2 of the block;
//   - IPv6: 2001:db8:PPPP:PPSS::/64 where P are the 22 bits of the pid and
//     S the low 10 bits of n, ends ::1 and ::2.
func pairAddrs(pid int, n uint32) (a4, b4, a6, b6 netip.Prefix) {
	block := uint32(pid%128)<<8 | n%256
	base := 198<<24 | 18<<16 | block<<2
	v4 := func(host uint32) netip.Prefix {
		x := base | host
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}), 30)
	}
	mid := uint32(pid)&(1<<22-1)<<10 | n&(1<<10-1)
	v6 := func(host byte) netip.Prefix {
		a := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(mid >> 24), byte(mid >> 16), byte(mid >> 8), byte(mid)}
		a[15] = host
		return netip.PrefixFrom(netip.AddrFrom16(a), 64)
	}
	return v4(1), v4(2), v6(1), v6(2)
}

var pid = os.Getpid()
