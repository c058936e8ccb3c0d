package xdpprog

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf/asm"
)

// The Filter fields a receiver of replies needs: VLAN IDs, non-IP
// EtherTypes, address prefixes and the management preset. Each is a short
// chain of compares against immediates, so nothing but the packet is read
// and no helper is called (no register is clobbered).

// vlanIDs passes a tagged frame whose VLAN ID is not in f.vlans. R7 is the
// frame; the tag was bounds-checked.
func (b *builder) vlanIDs(f *filter) {
	if len(f.vlans) == 0 {
		return
	}
	b.emit(
		asm.LoadMem(asm.R3, asm.R7, ethHdrLen, asm.Half),
		asm.HostTo(asm.BE, asm.R3, asm.Half),
		asm.And.Imm(asm.R3, 0x0fff),
	)
	for _, v := range f.vlans {
		b.emit(asm.JEq.Imm(asm.R3, int32(v), "vlan_ok"))
	}
	b.emit(asm.Ja.Label(lblPass))
	b.mark("vlan_ok")
}

// etherTypes runs at the L3 dispatch with R2 the EtherType: ARP stays in
// the kernel under Management, the listed EtherTypes are redirected.
func (b *builder) etherTypes(f *filter) {
	if f.mgmt {
		b.emit(asm.JEq.Imm(asm.R2, ethPARP, lblPass))
	}
	for _, e := range f.etypes {
		b.emit(asm.JEq.Imm(asm.R2, int32(e), lblRedirect))
	}
}

// management passes TCP from or to port 22. R9 is the L4 header (its
// minimal length checked), R4 the protocol.
func (b *builder) management(f *filter) {
	if !f.mgmt {
		return
	}
	b.emit(
		asm.JNE.Imm(asm.R4, protoTCP, "mgmt_done"),
		asm.LoadMem(asm.R1, asm.R9, 0, asm.Half),
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.JEq.Imm(asm.R1, portSSH, lblPass),
		asm.LoadMem(asm.R1, asm.R9, 2, asm.Half),
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.JEq.Imm(asm.R1, portSSH, lblPass),
	)
	b.mark("mgmt_done")
}

// prefixes4 checks the IPv4 source and destination prefixes. R9 is the
// IPv4 header (20 bytes checked); R0, R1 and R5 are free, R3 and R4 are
// kept.
func (b *builder) prefixes4(f *filter) {
	if f.srcPfx {
		b.prefixList4("src4", 12, f.src4)
	}
	if f.dstPfx {
		b.prefixList4("dst4", 16, f.dst4)
	}
}

func (b *builder) prefixList4(name string, off int16, ps []netip.Prefix) {
	ok := name + "_ok"
	b.emit(asm.LoadMem(asm.R0, asm.R9, off, asm.Word))
	for _, p := range ps {
		a := p.Addr().As4()
		w, m := words(a[:], p.Bits())
		switch p.Bits() {
		case 0:
			b.emit(asm.Ja.Label(ok))
		case 32:
			b.emit(asm.JEq.Imm32(asm.R0, int32(w[0]), ok))
		default:
			b.emit(
				asm.Mov.Reg(asm.R1, asm.R0),
				asm.And.Imm32(asm.R1, int32(m[0])),
				asm.JEq.Imm32(asm.R1, int32(w[0]&m[0]), ok),
			)
		}
	}
	b.emit(asm.Ja.Label(lblPass))
	b.mark(ok)
}

// prefixes6 checks the IPv6 source and destination prefixes. R9 is the
// IPv6 header (40 bytes checked); R0-R3 and R5 are free, R4 is kept.
func (b *builder) prefixes6(f *filter) {
	if f.srcPfx {
		b.prefixList6("src6", 8, f.src6)
	}
	if f.dstPfx {
		b.prefixList6("dst6", 24, f.dst6)
	}
}

func (b *builder) prefixList6(name string, off int16, ps []netip.Prefix) {
	ok := name + "_ok"
	regs := [4]asm.Register{asm.R0, asm.R1, asm.R2, asm.R3}
	for j, r := range regs {
		b.emit(asm.LoadMem(r, asm.R9, off+int16(4*j), asm.Word))
	}
	for i, p := range ps {
		a := p.Addr().As16()
		w, m := words(a[:], p.Bits())
		next := fmt.Sprintf("%s_next_%d", name, i)
		for j, r := range regs {
			bits := min(max(p.Bits()-32*j, 0), 32)
			switch bits {
			case 0:
			case 32:
				b.emit(asm.JNE.Imm32(r, int32(w[j]), next))
			default:
				b.emit(
					asm.Mov.Reg(asm.R5, r),
					asm.And.Imm32(asm.R5, int32(m[j])),
					asm.JNE.Imm32(asm.R5, int32(w[j]&m[j]), next),
				)
			}
		}
		b.emit(asm.Ja.Label(ok))
		b.mark(next)
	}
	b.emit(asm.Ja.Label(lblPass))
	b.mark(ok)
}

// words returns the address a and the mask of its first bits bits as
// words in the order a load from the packet gives them (native endian).
func words(a []byte, bits int) (w, m []uint32) {
	mask := make([]byte, len(a))
	for i := range mask {
		n := min(max(bits-8*i, 0), 8)
		mask[i] = byte(0xff << (8 - n))
	}
	for i := 0; i < len(a); i += 4 {
		w = append(w, binary.NativeEndian.Uint32(a[i:]))
		m = append(m, binary.NativeEndian.Uint32(mask[i:]))
	}
	return w, m
}
