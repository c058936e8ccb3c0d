package nt

// MinSize is the smallest copy for which Copy uses nontemporal stores
// (where Supported); below it Copy is the builtin copy. See the package
// documentation for the measurement behind the value.
const MinSize = 256

// minNT is MinSize, a variable so that tests can lower it.
var minNT = MinSize

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns that
// count, like the builtin copy. On amd64 the whole 64-byte lines of dst are
// written with nontemporal (cache-bypassing) stores and the partial lines at
// either end with ordinary stores; copies shorter than 256 bytes, and copies
// whose dst and src overlap, use the builtin copy.
//
// Copy does not fence. The nontemporal stores are weakly ordered: another
// core or a device may see them after later ordinary stores, such as the
// store of a ring's producer index. Call Fence once after a batch of Copy
// calls and before publishing; publishing before Fence is a bug.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < minNT || !Supported {
		return copy(dst, src)
	}
	dst, src = dst[:n], src[:n]
	if overlap(dst, src) {
		return copy(dst, src)
	}
	copyNT(dst, src)
	return n
}
