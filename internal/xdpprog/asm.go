package xdpprog

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// Map symbols the instructions reference; Load associates the maps.
const (
	symXSKs  = "xsks"
	symPorts = "ports"
)

// Constants of the XDP ABI and of the protocols parsed.
const (
	xdpPass = 2 // XDP_PASS

	// struct xdp_md field offsets (include/uapi/linux/bpf.h).
	mdData         = 0
	mdDataEnd      = 4
	mdRxQueueIndex = 16

	ethHdrLen  = 14
	vlanHdrLen = 4

	ethPIPv4   = 0x0800
	ethPIPv6   = 0x86dd
	ethP8021Q  = 0x8100
	ethP8021AD = 0x88a8

	protoTCP = 6
	protoUDP = 17

	ipv4MinHdrLen = 20
	ipv6HdrLen    = 40
	udpHdrLen     = 8
	tcpMinHdrLen  = 20
)

// Labels.
const (
	lblPass     = "pass"
	lblRedirect = "redirect"
	lblVLAN     = "vlan"
	lblL3       = "l3"
	lblIPv4     = "ipv4"
	lblIPv6     = "ipv6"
	lblL4       = "l4"
	lblL4TCP    = "l4_tcp"
	lblL4Check  = "l4_check"
)

// builder appends instructions and puts pending labels on the next one.
type builder struct {
	insns asm.Instructions
	label string
}

func (b *builder) emit(insns ...asm.Instruction) {
	for _, ins := range insns {
		if b.label != "" {
			ins = ins.WithSymbol(b.label)
			b.label = ""
		}
		b.insns = append(b.insns, ins)
	}
}

// mark labels the next instruction. An instruction carries one symbol, so
// when a label is already pending, the pending one becomes a jump to the
// new one.
func (b *builder) mark(label string) {
	if b.label != "" {
		b.emit(asm.Ja.Label(label))
	}
	b.label = label
}

// instructions assembles the program for f (nil: no filter).
//
// Registers while filtering: R6 ctx, R7 data, R8 data_end, R9 the header
// being parsed (L3, then L4), R4 the L4 protocol; R0-R5 scratch. No helper
// is called before the final bpf_redirect_map, so no register is clobbered.
func instructions(f *filter, m *metaPlan) asm.Instructions {
	b := &builder{}
	b.emit(asm.Mov.Reg(asm.R6, asm.R1))
	if f != nil {
		b.filter(f)
	}
	// return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	b.mark(lblRedirect)
	b.meta(m) // meta.go; nothing without metadata
	b.emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(symXSKs),
		asm.LoadMem(asm.R2, asm.R6, mdRxQueueIndex, asm.Word),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
	)
	b.metaUndo(m) // meta.go; nothing without metadata
	b.emit(asm.Return())
	if f != nil {
		b.mark(lblPass)
		b.emit(
			asm.Mov.Imm(asm.R0, xdpPass),
			asm.Return(),
		)
	}
	return b.insns
}

func (b *builder) filter(f *filter) {
	// Ethernet, then at most one VLAN tag. R2 = ethertype (host order).
	b.emit(
		asm.LoadMem(asm.R7, asm.R6, mdData, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R9, asm.R7),
		asm.Add.Imm(asm.R9, ethHdrLen),
		asm.JGT.Reg(asm.R9, asm.R8, lblPass),
		asm.LoadMem(asm.R2, asm.R7, 12, asm.Half),
		asm.HostTo(asm.BE, asm.R2, asm.Half),
		asm.JEq.Imm(asm.R2, ethP8021Q, lblVLAN),
		asm.JEq.Imm(asm.R2, ethP8021AD, lblVLAN),
		asm.Ja.Label(lblL3),
	)
	b.mark(lblVLAN)
	b.emit(
		asm.Add.Imm(asm.R9, vlanHdrLen),
		asm.JGT.Reg(asm.R9, asm.R8, lblPass),
		asm.LoadMem(asm.R2, asm.R7, ethHdrLen+2, asm.Half),
		asm.HostTo(asm.BE, asm.R2, asm.Half),
	)
	b.mark(lblL3)
	if f.v4() {
		b.emit(asm.JEq.Imm(asm.R2, ethPIPv4, lblIPv4))
	}
	if f.v6() {
		b.emit(asm.JEq.Imm(asm.R2, ethPIPv6, lblIPv6))
	}
	b.emit(asm.Ja.Label(lblPass))

	if f.v4() {
		b.ipv4(f)
	}
	if f.v6() {
		b.ipv6(f)
	}

	// L4: R9 = UDP/TCP header, R4 = protocol. The whole minimal header
	// must be present.
	b.mark(lblL4)
	b.emit(
		asm.Mov.Reg(asm.R1, asm.R9),
		asm.JEq.Imm(asm.R4, protoTCP, lblL4TCP),
		asm.Add.Imm(asm.R1, udpHdrLen),
		asm.Ja.Label(lblL4Check),
	)
	b.mark(lblL4TCP)
	b.emit(asm.Add.Imm(asm.R1, tcpMinHdrLen))
	b.mark(lblL4Check)
	b.emit(asm.JGT.Reg(asm.R1, asm.R8, lblPass))
	if len(f.ports) > 0 {
		// bit (port & 7) of byte (port >> 3) of the port bitmap.
		b.emit(
			asm.LoadMem(asm.R2, asm.R9, 2, asm.Half),
			asm.HostTo(asm.BE, asm.R2, asm.Half),
			asm.And.Imm(asm.R2, 0xffff), // bounds for the verifier
			asm.Mov.Reg(asm.R3, asm.R2),
			asm.RSh.Imm(asm.R3, 3),
			asm.LoadMapValue(asm.R1, 0, 0).WithReference(symPorts),
			asm.Add.Reg(asm.R1, asm.R3),
			asm.LoadMem(asm.R1, asm.R1, 0, asm.Byte),
			asm.And.Imm(asm.R2, 7),
			asm.RSh.Reg(asm.R1, asm.R2),
			asm.And.Imm(asm.R1, 1),
			asm.JEq.Imm(asm.R1, 0, lblPass),
		)
	}
	// falls through to redirect
}

// proto passes packets whose L4 protocol (in reg) is not selected.
func (b *builder) proto(reg asm.Register, udp, tcp bool, okLabel string) {
	switch {
	case udp && tcp:
		b.emit(
			asm.JEq.Imm(reg, protoUDP, okLabel),
			asm.JNE.Imm(reg, protoTCP, lblPass),
		)
		b.mark(okLabel)
	case udp:
		b.emit(asm.JNE.Imm(reg, protoUDP, lblPass))
	case tcp:
		b.emit(asm.JNE.Imm(reg, protoTCP, lblPass))
	}
}

func (b *builder) ipv4(f *filter) {
	b.mark(lblIPv4)
	b.emit(
		asm.Mov.Reg(asm.R1, asm.R9),
		asm.Add.Imm(asm.R1, ipv4MinHdrLen),
		asm.JGT.Reg(asm.R1, asm.R8, lblPass),
		// version 4, IHL >= 5; R3 = header length in bytes (20..60).
		asm.LoadMem(asm.R3, asm.R9, 0, asm.Byte),
		asm.Mov.Reg(asm.R1, asm.R3),
		asm.RSh.Imm(asm.R1, 4),
		asm.JNE.Imm(asm.R1, 4, lblPass),
		asm.And.Imm(asm.R3, 0x0f),
		asm.JLT.Imm(asm.R3, 5, lblPass),
		asm.LSh.Imm(asm.R3, 2),
		asm.LoadMem(asm.R4, asm.R9, 9, asm.Byte),
	)
	b.proto(asm.R4, f.udp4, f.tcp4, "ipv4_proto_ok")
	if len(f.pass4) > 0 {
		b.emit(asm.LoadMem(asm.R5, asm.R9, 16, asm.Word))
		for _, a := range f.pass4 {
			b.emit(asm.JEq.Imm32(asm.R5, int32(binary.NativeEndian.Uint32(a[:])), lblPass))
		}
	}
	b.onlyDst4(f.only)
	// Flags and fragment offset.
	b.emit(
		asm.LoadMem(asm.R5, asm.R9, 6, asm.Half),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
	)
	if len(f.ports) > 0 {
		// Any fragment (MF or offset): the kernel gets all pieces.
		b.emit(
			asm.And.Imm(asm.R5, 0x3fff),
			asm.JNE.Imm(asm.R5, 0, lblPass),
		)
	} else {
		// A non-first fragment has no L4 header to check.
		b.emit(
			asm.And.Imm(asm.R5, 0x1fff),
			asm.JNE.Imm(asm.R5, 0, lblRedirect),
		)
	}
	// R9 += R3, written as a compare chain of immediate adds: without
	// CAP_PERFMON the verifier refuses a packet pointer plus a variable
	// register ("pointer arithmetic with it prohibited for !root"), and
	// xdpkit needs only CAP_BPF and CAP_NET_ADMIN to load.
	for words := 5; words < 15; words++ {
		next := fmt.Sprintf("ihl_%d", words+1)
		b.emit(
			asm.JNE.Imm(asm.R3, int32(4*words), next),
			asm.Add.Imm(asm.R9, int32(4*words)),
			asm.Ja.Label(lblL4),
		)
		b.mark(next)
	}
	b.emit(
		asm.Add.Imm(asm.R9, 60),
		asm.Ja.Label(lblL4),
	)
}

func (b *builder) ipv6(f *filter) {
	b.mark(lblIPv6)
	b.emit(
		asm.Mov.Reg(asm.R1, asm.R9),
		asm.Add.Imm(asm.R1, ipv6HdrLen),
		asm.JGT.Reg(asm.R1, asm.R8, lblPass),
		asm.LoadMem(asm.R3, asm.R9, 0, asm.Byte),
		asm.RSh.Imm(asm.R3, 4),
		asm.JNE.Imm(asm.R3, 6, lblPass),
		// Next header must be UDP/TCP directly; extension headers pass.
		asm.LoadMem(asm.R4, asm.R9, 6, asm.Byte),
	)
	b.proto(asm.R4, f.udp6, f.tcp6, "ipv6_proto_ok")
	if len(f.pass6) > 0 {
		b.emit(
			asm.LoadMem(asm.R0, asm.R9, 24, asm.Word),
			asm.LoadMem(asm.R1, asm.R9, 28, asm.Word),
			asm.LoadMem(asm.R2, asm.R9, 32, asm.Word),
			asm.LoadMem(asm.R3, asm.R9, 36, asm.Word),
		)
		for i, a := range f.pass6 {
			next := fmt.Sprintf("pass6_next_%d", i)
			w := func(j int) int32 { return int32(binary.NativeEndian.Uint32(a[4*j:])) }
			b.emit(
				asm.JNE.Imm32(asm.R0, w(0), next),
				asm.JNE.Imm32(asm.R1, w(1), next),
				asm.JNE.Imm32(asm.R2, w(2), next),
				asm.JEq.Imm32(asm.R3, w(3), lblPass),
			)
			b.mark(next)
		}
	}
	b.onlyDst6(f.only)
	b.emit(asm.Add.Imm(asm.R9, ipv6HdrLen))
	// falls through to L4
}
