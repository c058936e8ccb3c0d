package xdpprog

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf/asm"
)

// onlyDst is Filter.OnlyDst, validated and split by IP version: the only
// destination addresses whose packets are redirected.
type onlyDst struct {
	v4 [][4]byte  // sorted, unique
	v6 [][16]byte // sorted, unique
}

// newOnlyDst validates list; an empty list gives nil (no restriction).
func newOnlyDst(list []netip.Addr) (*onlyDst, error) {
	if len(list) == 0 {
		return nil, nil
	}
	if len(list) > MaxPassDst {
		return nil, fmt.Errorf("%w: %d OnlyDst addresses, at most %d", ErrInvalidConfig, len(list), MaxPassDst)
	}
	o := &onlyDst{}
	for _, a := range list {
		if !a.IsValid() {
			return nil, fmt.Errorf("%w: invalid OnlyDst address %v", ErrInvalidConfig, a)
		}
		a = a.Unmap().WithZone("")
		if a.Is4() {
			o.v4 = append(o.v4, a.As4())
		} else {
			o.v6 = append(o.v6, a.As16())
		}
	}
	slices.SortFunc(o.v4, func(a, b [4]byte) int { return netip.AddrFrom4(a).Compare(netip.AddrFrom4(b)) })
	o.v4 = slices.Compact(o.v4)
	slices.SortFunc(o.v6, func(a, b [16]byte) int { return netip.AddrFrom16(a).Compare(netip.AddrFrom16(b)) })
	o.v6 = slices.Compact(o.v6)
	return o, nil
}

// has4 and has6 report whether packets of the IP version can be
// redirected at all: not when OnlyDst lists none of its addresses.
func (o *onlyDst) has4() bool { return o == nil || len(o.v4) > 0 }
func (o *onlyDst) has6() bool { return o == nil || len(o.v6) > 0 }

// onlyDst4 passes IPv4 packets (R9 the IPv4 header, at least 20 bytes
// present) whose destination is not in o. It uses R5.
func (b *builder) onlyDst4(o *onlyDst) {
	if o == nil {
		return
	}
	const ok = "only4_ok"
	b.emit(asm.LoadMem(asm.R5, asm.R9, 16, asm.Word))
	for _, a := range o.v4 {
		b.emit(asm.JEq.Imm32(asm.R5, int32(binary.NativeEndian.Uint32(a[:])), ok))
	}
	b.emit(asm.Ja.Label(lblPass))
	b.mark(ok)
}

// onlyDst6 passes IPv6 packets (R9 the IPv6 header, all 40 bytes
// present) whose destination is not in o. It uses R0-R3.
func (b *builder) onlyDst6(o *onlyDst) {
	if o == nil {
		return
	}
	const ok = "only6_ok"
	b.emit(
		asm.LoadMem(asm.R0, asm.R9, 24, asm.Word),
		asm.LoadMem(asm.R1, asm.R9, 28, asm.Word),
		asm.LoadMem(asm.R2, asm.R9, 32, asm.Word),
		asm.LoadMem(asm.R3, asm.R9, 36, asm.Word),
	)
	for i, a := range o.v6 {
		next := fmt.Sprintf("only6_next_%d", i)
		w := func(j int) int32 { return int32(binary.NativeEndian.Uint32(a[4*j:])) }
		b.emit(
			asm.JNE.Imm32(asm.R0, w(0), next),
			asm.JNE.Imm32(asm.R1, w(1), next),
			asm.JNE.Imm32(asm.R2, w(2), next),
			asm.JEq.Imm32(asm.R3, w(3), ok),
		)
		b.mark(next)
	}
	b.emit(asm.Ja.Label(lblPass))
	b.mark(ok)
}
