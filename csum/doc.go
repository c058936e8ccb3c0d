// Package csum computes the Internet checksum (RFC 1071) at memory speed:
// the ones'-complement sum of a byte slice, a copy that sums what it copies
// in the same pass, incremental updates (RFC 1624), the IPv4 and IPv6
// pseudo-headers, and helpers that fill the checksum fields of a frame in
// place. It allocates nothing.
//
// # Contracts
//
// Byte order. Data is summed as big-endian (network order) 16-bit words,
// wherever it sits in memory: b need not be aligned, and on a little-endian
// machine the kernels sum little-endian words and swap once at the end.
// Every uint16 this package returns or takes (Fold, Finish, Update16's
// arguments, ...) is the value of a field as read with
// binary.BigEndian.Uint16, and is stored with binary.BigEndian.PutUint16.
//
// Partial sum. A partial sum is a uint32 whose value is congruent, modulo
// 0xFFFF, to the ones'-complement sum of the words summed so far, and is
// zero only when every one of those words was zero. It is not folded to 16
// bits and not complemented; any uint32 is a valid partial sum (0 is the
// empty sum), so partial sums can be passed on as the initial value of the
// next Sum or CopyAndSum, added with Add or Combine, and finished with Fold,
// Finish or FinishUDP. The pseudo-header functions return partial sums.
//
// Odd lengths. A slice of odd length is summed as if padded with one zero
// byte at the end (RFC 1071: the last byte is the high byte of its word).
// So the data of a packet may be summed in pieces by chaining
// Sum(piece, sum) only while every piece but the last has even length; a
// piece that starts at an odd offset of the packet is summed on its own
// and added with Combine(sum, Sum(piece, 0), offset), which byte-swaps its
// sum. Either way the result equals the sum of the whole packet at once.
//
// Zero. Fold returns 0 only for an all-zero sum and 0xFFFF ("minus zero")
// for non-zero data whose words add up to a multiple of 0xFFFF, exactly as
// a ones'-complement adder does; Finish turns these into the checksum
// values 0xFFFF and 0. A UDP checksum of 0 means "none", so FinishUDP
// sends a computed 0 as 0xFFFF, for IPv4 (RFC 768) and IPv6 (RFC 8200).
//
// Verifying. Data whose checksum field is right sums (with its
// pseudo-header, for UDP and TCP) to a partial sum whose Finish is 0.
//
// CopyAndSum copies all of src into dst and panics if dst is shorter, like
// cipher.Stream.XORKeyStream: a checksum over a silently truncated copy
// would be wrong. dst may be longer; only dst[:len(src)] is written. dst
// and src must not overlap, except exactly.
//
// Incremental updates. Update16, Update32 and Update take the checksum
// field's current value and a field's old and new contents and return the
// new checksum field value by RFC 1624 equation 3, HC' = ~(~HC + ~m + m'),
// which equals a full recomputation for any data that is not all zero
// (RFC 1141's HC' = HC + m - m' can yield 0xFFFF where recomputation
// gives 0). The changed field must start at an even offset.
//
// # The transmit path
//
// Copying a UDP payload into a frame and finishing the checksum, with one
// pass over the payload and no allocation:
//
//	s := csum.PseudoHeaderIPv4(src, dst, csum.ProtoUDP, uint16(8+len(payload)))
//	s = csum.CopyAndSum(frame[udp+8:], payload, s) // payload at an even offset of the segment
//	// ... write ports and length into frame[udp:udp+8], checksum field 0 ...
//	s = csum.Sum(frame[udp:udp+8], s)
//	binary.BigEndian.PutUint16(frame[udp+6:], csum.FinishUDP(s))
//
// FillFrame, FillIPv4 and FillTransport do the same for a frame that is
// already built (Ethernet, up to two VLAN tags, IPv4 or IPv6 without
// extension headers, UDP or TCP).
//
// # Implementations
//
// On amd64 (gc, without the purego build tag) Sum and CopyAndSum are
// each one call into assembly: an ADD/ADC chain below 33 bytes (128 for
// CopyAndSum, over the words it loads and stores), and AVX2 kernels from
// there. Where the CPU has AVX-512 (F), its kernels take over from 288
// bytes (256 for CopyAndSum). The kernels are chosen at start-up with
// golang.org/x/sys/cpu. Every kernel sums the data from 0 and adds the
// initial value last: Sum adds it in Go, after the call, so that a chain
// of dependent sums waits for that add and the caller's own save of the
// value across the call, not for the assembly's argument and result
// slots, and CopyAndSum's kernels add it themselves. The vector kernels add whole
// 64-bit lanes to a
// wrapping accumulator and their high halves to a second one, three
// instructions per vector and no carry handling in the loop (see
// sum_amd64.s). No kernel touches a byte outside its slices, not even
// under a mask (TestGuardPage). Elsewhere, and with -tags purego, a
// pure-Go kernel does everything: a math/bits.Add64 carry chain and the
// carry-free scheme side by side over 64-byte blocks. The tests run every
// kernel the machine supports.
//
// # Performance
//
// BenchmarkSum and BenchmarkCopyAndSum measure by size and layout (for
// example BenchmarkSum/4096/page-end and /4096/mid-page); BenchmarkSumImpl
// forces each kernel set; BenchmarkPaired sets Sum and CopyAndSum beside a
// byte-pair loop and copy() followed by Sum. README.md in this directory
// has the tables, and make bench the C kernels of the same kinds.
package csum
