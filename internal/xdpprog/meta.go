package xdpprog

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// RX metadata: with Config.Metadata the program puts a fixed 32-byte
// record in the metadata area in front of every frame it redirects
// (bpf_xdp_adjust_meta), which an AF_XDP socket finds at desc.addr - 32
// (copy mode copies the metadata with the frame; the RX descriptor carries
// no metadata length, hence the fixed layout and the magic word).
//
//	offset  size  field
//	 0      8     device RX timestamp, ns (bpf_xdp_metadata_rx_timestamp)
//	 8      8     XDP hook time, CLOCK_TAI ns (bpf_ktime_get_tai_ns)
//	16      4     RX hash (bpf_xdp_metadata_rx_hash)
//	20      4     RX hash type (enum xdp_rss_hash_type)
//	24      4     flags: MetaRXTimestamp | MetaRXHash | MetaXDPTime
//	28      4     MetaMagic
//
// All fields are in host byte order. A field is valid only if its flag is
// set: a kfunc that fails (ENODATA, EOPNOTSUPP) leaves its flag clear, and
// so does a device timestamp that is not positive (veth reports the skb's
// hardware timestamp, zero for a packet no NIC stamped).
const (
	MetaLen   = 32
	MetaMagic = 0x314d4b58 // "XKM1" in little-endian memory

	MetaRXTimestamp = 1 << 0
	MetaRXHash      = 1 << 1
	MetaXDPTime     = 1 << 2

	mdDataMeta = 8 // struct xdp_md.data_meta

	kfuncRXTimestamp = "bpf_xdp_metadata_rx_timestamp"
	kfuncRXHash      = "bpf_xdp_metadata_rx_hash"

	lblMetaDone   = "meta_done"
	lblMetaNoTS   = "meta_no_ts"
	lblMetaNoHash = "meta_no_hash"
	lblMetaKeep   = "meta_keep"

	// BPF_F_XDP_DEV_BOUND_ONLY (include/uapi/linux/bpf.h, Linux 6.3).
	bpfFXDPDevBoundOnly = 1 << 6
)

// MetaLevel is what the loaded program writes into the metadata area.
type MetaLevel int

const (
	// MetaNone: the plain program, no metadata.
	MetaNone MetaLevel = iota
	// MetaXDPTimeOnly: the XDP hook time only (Linux 6.1's
	// bpf_ktime_get_tai_ns); the program is not bound to the device, so
	// it also runs in generic mode.
	MetaXDPTimeOnly
	// MetaKfuncs: device-bound (BPF_F_XDP_DEV_BOUND_ONLY), calling the
	// driver's RX timestamp and RX hash kfuncs (Linux 6.3), plus the XDP
	// hook time. Such a program attaches in native mode only.
	MetaKfuncs
)

// String names the value, for messages.
func (l MetaLevel) String() string {
	switch l {
	case MetaNone:
		return "none"
	case MetaXDPTimeOnly:
		return "xdp-time"
	case MetaKfuncs:
		return "kfuncs"
	}
	return fmt.Sprintf("MetaLevel(%d)", int(l))
}

// metaPlan is the metadata variant of a Program.
type metaPlan struct {
	level   MetaLevel
	ifindex int        // device the MetaKfuncs program is bound to
	tsID    btf.TypeID // BTF ids of the kfuncs in vmlinux
	hashID  btf.TypeID
	why     error // why a higher level was not had; nil if none was wanted
}

// kfuncIDs finds the RX metadata kfuncs in the kernel's BTF, with the
// signatures this program calls (rx_hash took its third argument, the hash
// type, in 6.3).
func kfuncIDs() (ts, hash btf.TypeID, err error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, 0, fmt.Errorf("kernel BTF: %w", err)
	}
	id := func(name string, params int) (btf.TypeID, error) {
		var fn *btf.Func
		if err := spec.TypeByName(name, &fn); err != nil {
			return 0, fmt.Errorf("kfunc %s: %w", name, err)
		}
		proto, ok := fn.Type.(*btf.FuncProto)
		if !ok || len(proto.Params) != params {
			return 0, fmt.Errorf("kfunc %s: unexpected signature %v", name, fn.Type)
		}
		return spec.TypeID(fn)
	}
	if ts, err = id(kfuncRXTimestamp, 2); err != nil {
		return 0, 0, err
	}
	if hash, err = id(kfuncRXHash, 3); err != nil {
		return 0, 0, err
	}
	return ts, hash, nil
}

// kfuncLookup is kfuncIDs; a test makes it fail as on a kernel without
// the kfuncs.
var kfuncLookup = kfuncIDs

// kfuncCall calls the kfunc with the vmlinux BTF id id.
func kfuncCall(id btf.TypeID) asm.Instruction {
	return asm.Instruction{
		OpCode:   asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call),
		Src:      asm.PseudoKfuncCall,
		Constant: int64(id),
	}
}

// meta emits the metadata writer; it runs where the program has decided
// to redirect, with R6 = ctx, and clobbers R0-R5, R7-R9 and the stack
// slots fp-8 and fp-16. It falls through to the redirect.
func (b *builder) meta(m *metaPlan) {
	if m == nil || m.level == MetaNone {
		return
	}
	b.emit(
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, -MetaLen),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, lblMetaDone),
		asm.Mov.Imm(asm.R9, 0), // flags
		asm.StoreMem(asm.RFP, -8, asm.R9, asm.DWord),
		asm.StoreMem(asm.RFP, -16, asm.R9, asm.DWord),
	)
	if m.level == MetaKfuncs {
		b.emit(
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			kfuncCall(m.tsID),
			asm.JNE.Imm(asm.R0, 0, lblMetaNoTS),
			asm.LoadMem(asm.R1, asm.RFP, -8, asm.DWord),
			asm.JSLE.Imm(asm.R1, 0, lblMetaNoTS),
			asm.Or.Imm(asm.R9, MetaRXTimestamp),
		)
		b.mark(lblMetaNoTS)
		b.emit(
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -16),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, -12),
			kfuncCall(m.hashID),
			asm.JNE.Imm(asm.R0, 0, lblMetaNoHash),
			asm.Or.Imm(asm.R9, MetaRXHash),
		)
		b.mark(lblMetaNoHash)
	}
	b.emit(
		asm.FnKtimeGetTaiNs.Call(),
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.Or.Imm(asm.R9, MetaXDPTime),
		// The kfuncs do not move the packet, but reload the pointers
		// after the calls anyway, and check the room once more.
		asm.LoadMem(asm.R2, asm.R6, mdDataMeta, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, mdData, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, MetaLen),
		asm.JGT.Reg(asm.R4, asm.R3, lblMetaDone),
		asm.LoadMem(asm.R1, asm.RFP, -8, asm.DWord),
		asm.StoreMem(asm.R2, 0, asm.R1, asm.DWord),
		asm.StoreMem(asm.R2, 8, asm.R8, asm.DWord),
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.Word),
		asm.StoreMem(asm.R2, 16, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.RFP, -12, asm.Word),
		asm.StoreMem(asm.R2, 20, asm.R1, asm.Word),
		asm.StoreMem(asm.R2, 24, asm.R9, asm.Word),
		asm.StoreImm(asm.R2, 28, MetaMagic, asm.Word),
	)
	b.mark(lblMetaDone)
}

// metaUndo takes the record back off a packet that bpf_redirect_map
// passed to the stack (XDP_PASS: no socket on its queue): left on, it
// would reach the skb as metadata (veth and generic XDP keep it), where
// GRO does not merge packets whose metadata differ, and every record
// differs by its time. R0 holds the verdict and is kept; R6 (ctx)
// survived the helper call. An adjust that fails (no record was put on:
// the meta area is empty) changes nothing.
func (b *builder) metaUndo(m *metaPlan) {
	if m == nil || m.level == MetaNone {
		return
	}
	b.emit(
		asm.JNE.Imm(asm.R0, xdpPass, lblMetaKeep),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, MetaLen),
		asm.FnXdpAdjustMeta.Call(),
		asm.Mov.Imm(asm.R0, xdpPass),
	)
	b.mark(lblMetaKeep)
}

// loadMetaFirst loads the program for Load when Config.Metadata asks for
// metadata: the device-bound program with the kfuncs where the kernel
// has them and Config.Ifindex names the device, else the XDP-time-only
// program, else the plain one. p.meta records what it got and why not
// more.
func (p *Program) loadMetaFirst(frags bool) (*ebpf.Program, error) {
	var whys []error
	if p.cfg.Ifindex <= 0 {
		whys = append(whys, errors.New("no interface index to bind the program to"))
	} else if ts, hash, err := kfuncLookup(); err != nil {
		whys = append(whys, err)
	} else {
		p.meta = &metaPlan{level: MetaKfuncs, ifindex: p.cfg.Ifindex, tsID: ts, hashID: hash}
		prog, err := p.load(frags)
		if err == nil {
			return prog, nil
		}
		whys = append(whys, fmt.Errorf("device-bound load: %w", err))
	}
	for _, level := range []MetaLevel{MetaXDPTimeOnly, MetaNone} {
		p.meta = &metaPlan{level: level}
		prog, err := p.load(frags)
		if err == nil {
			p.meta.why = errors.Join(whys...)
			return prog, nil
		}
		if level == MetaNone {
			return nil, errors.Join(append(whys, err)...)
		}
		whys = append(whys, fmt.Errorf("%v load: %w", level, err))
	}
	panic("unreachable")
}

// apply applies the plan to a program spec.
func (m *metaPlan) apply(spec *ebpf.ProgramSpec) {
	if m == nil || m.level != MetaKfuncs {
		return
	}
	spec.Flags |= bpfFXDPDevBoundOnly
	spec.Ifindex = uint32(m.ifindex)
}

// unbindForGeneric replaces a device-bound program by the XDP-time-only
// one before a generic attach, which the kernel refuses for device-bound
// programs ("Can't attach device-bound programs in generic mode").
func (p *Program) unbindForGeneric() error {
	if p.meta == nil || p.meta.level != MetaKfuncs {
		return nil
	}
	old := p.meta
	p.meta = &metaPlan{level: MetaXDPTimeOnly, why: errors.New("generic mode cannot run a device-bound program")}
	prog, err := p.load(p.frags)
	if err != nil {
		p.meta = old
		return err
	}
	p.prog.Close()
	p.prog = prog
	return nil
}

// Metadata reports what the program writes in front of each redirected
// frame, and, when that is less than Config.Metadata asked for, why.
func (p *Program) Metadata() (MetaLevel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meta == nil {
		return MetaNone, nil
	}
	return p.meta.level, p.meta.why
}
