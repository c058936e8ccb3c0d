package conformance

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// The XDP programs of the kernel suite (tools/testing/selftests/bpf/
// progs/xsk_xdp_progs.c), written here with cilium/ebpf's assembler so
// that no clang is needed. Each redirects to an XSKMAP of two entries,
// with XDP_DROP when the key has no socket; count is a one-entry array
// the program keeps its state in (a packet counter).

type progKind int

const (
	progDefault    progKind = iota // xsk_def_prog: every packet to key 0
	progDropHalf                   // xsk_xdp_drop: every other packet dropped
	progMetadata                   // xsk_xdp_populate_metadata: a counter in 32 bytes of bpf_xdp_adjust_meta
	progSharedUMEM                 // xsk_xdp_shared_umem: key = destination MAC's last byte / 2
	progAdjustTail                 // xsk_xdp_adjust_tail: bpf_xdp_adjust_tail(adjust) and, grown, the last word
)

// The entries of the count map: the program's own counter, and what
// progAdjustTail counts of the packets bpf_xdp_adjust_tail refused.
const (
	countPackets     = 0 // progDropHalf, progMetadata: packets seen
	countRefused     = 1 // progAdjustTail: refused for lack of room (-EINVAL), dropped
	countUnsupported = 2 // progAdjustTail: refused, -EOPNOTSUPP, passed on unchanged
	countEntries     = 3
)

const (
	xdpDrop     = 1
	xdpInfoSize = 32 // struct xdp_info: a __u64 count, aligned to 32
	pktHdrSize  = 16 // PKT_HDR_SIZE: the Ethernet header and 2 bytes
)

type progs struct {
	prog  *ebpf.Program
	xsks  *ebpf.Map
	count *ebpf.Map
}

func (p *progs) Close() error {
	var err error
	for _, c := range []interface{ Close() error }{p.prog, p.xsks, p.count} {
		if e := c.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// loadProg loads the program kind; adjust is the tail adjustment of
// progAdjustTail. frags loads it with BPF_F_XDP_HAS_FRAGS (xdp.frags).
func loadProg(kind progKind, adjust int32, frags bool) (*progs, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 2})
	if err != nil {
		return nil, fmt.Errorf("XSKMAP: %w", err)
	}
	count, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: countEntries})
	if err != nil {
		xsks.Close()
		return nil, fmt.Errorf("count map: %w", err)
	}
	var flags uint32
	if frags {
		flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	spec := &ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Flags: flags,
		Instructions: instructions(kind, adjust, xsks, count)}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		xsks.Close()
		count.Close()
		return nil, fmt.Errorf("load program: %w", err)
	}
	return &progs{prog: prog, xsks: xsks, count: count}, nil
}

// redirect ends the program with bpf_redirect_map(xsks, key in R2, XDP_DROP).
func redirect(xsks *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, xsks.FD()),
		asm.Mov.Imm(asm.R3, xdpDrop),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
}

// counter loads the address of count[key] into R0 (R6 keeps the
// context); the program drops the packet when the lookup fails.
func counter(count *ebpf.Map, key int32) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.R10, -4, int64(key), asm.Word),
		asm.LoadMapPtr(asm.R1, count.FD()),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
	}
}

func instructions(kind progKind, adjust int32, xsks, count *ebpf.Map) asm.Instructions {
	drop := asm.Instructions{asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("drop"), asm.Return()}
	var in asm.Instructions
	in = append(in, asm.Mov.Reg(asm.R6, asm.R1))
	switch kind {
	case progDefault:
		in = append(in, asm.Mov.Imm(asm.R2, 0))
		in = append(in, redirect(xsks)...)
	case progDropHalf:
		// if (idx++ % 2) return XDP_DROP;
		in = append(in, counter(count, countPackets)...)
		in = append(in,
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.Mov.Reg(asm.R2, asm.R1),
			asm.Add.Imm(asm.R2, 1),
			asm.StoreMem(asm.R0, 0, asm.R2, asm.DWord),
			asm.And.Imm(asm.R1, 1),
			asm.JNE.Imm(asm.R1, 0, "drop"),
			asm.Mov.Imm(asm.R2, 0),
		)
		in = append(in, redirect(xsks)...)
	case progMetadata:
		// bpf_xdp_adjust_meta(xdp, -32); meta->count = count++;
		in = append(in,
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, -xdpInfoSize),
			asm.FnXdpAdjustMeta.Call(),
			asm.JNE.Imm(asm.R0, 0, "drop"),
		)
		in = append(in, counter(count, countPackets)...)
		in = append(in,
			asm.LoadMem(asm.R7, asm.R6, 8, asm.Word), // data_meta
			asm.LoadMem(asm.R8, asm.R6, 0, asm.Word), // data
			asm.Mov.Reg(asm.R9, asm.R7),
			asm.Add.Imm(asm.R9, xdpInfoSize),
			asm.JGT.Reg(asm.R9, asm.R8, "drop"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.StoreMem(asm.R7, 0, asm.R1, asm.DWord),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R2, 0),
		)
		in = append(in, redirect(xsks)...)
	case progSharedUMEM:
		// idx = eth->h_dest[5] / 2
		in = append(in,
			asm.LoadMem(asm.R7, asm.R6, 0, asm.Word), // data
			asm.LoadMem(asm.R8, asm.R6, 4, asm.Word), // data_end
			asm.Mov.Reg(asm.R9, asm.R7),
			asm.Add.Imm(asm.R9, 14),
			asm.JGT.Reg(asm.R9, asm.R8, "drop"),
			asm.LoadMem(asm.R2, asm.R7, 5, asm.Byte),
			asm.RSh.Imm(asm.R2, 1),
		)
		in = append(in, redirect(xsks)...)
	case progAdjustTail:
		// len = bpf_xdp_get_buff_len(xdp);
		// ret = bpf_xdp_adjust_tail(xdp, adjust);
		// -EOPNOTSUPP: counted, passed on unchanged (the kernel suite's
		// program does the same and then skips the case); any other
		// refusal: counted, dropped. Grown: the last word gets the
		// sequence number the receiver expects there.
		in = append(in,
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.FnXdpGetBuffLen.Call(),
			asm.Mov.Reg(asm.R7, asm.R0),
			asm.JEq.Imm(asm.R7, 0, "drop"),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, adjust),
			asm.FnXdpAdjustTail.Call(),
			asm.JEq.Imm(asm.R0, 0, "adjusted"),
			asm.Mov.Imm(asm.R8, countRefused),
			asm.JNE.Imm(asm.R0, -int32(unix.EOPNOTSUPP), "refused"),
			asm.Mov.Imm(asm.R8, countUnsupported),
			// count[R8]++, then drop (R8 == countRefused) or pass on.
			asm.StoreMem(asm.R10, -4, asm.R8, asm.Word).WithSymbol("refused"),
			asm.LoadMapPtr(asm.R1, count.FD()),
			asm.Mov.Reg(asm.R2, asm.R10),
			asm.Add.Imm(asm.R2, -4),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "drop"),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
			asm.JEq.Imm(asm.R8, countRefused, "drop"),
			asm.Ja.Label("pass"),
			asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("adjusted"),
			asm.FnXdpGetBuffLen.Call(),
			asm.Mov.Reg(asm.R8, asm.R7),
			asm.Add.Imm(asm.R8, adjust),
			asm.JNE.Reg(asm.R0, asm.R8, "drop"),
		)
		if adjust > 0 {
			// word = htonl((len - PKT_HDR_SIZE)/4 - 1), the low half of
			// the payload word the receiver checks last.
			in = append(in,
				asm.Mov.Reg(asm.R9, asm.R0),
				asm.Sub.Imm(asm.R9, pktHdrSize),
				asm.RSh.Imm(asm.R9, 2),
				asm.Sub.Imm(asm.R9, 1),
				asm.HostTo(asm.BE, asm.R9, asm.Word),
				asm.StoreMem(asm.R10, -8, asm.R9, asm.Word),
				asm.Mov.Reg(asm.R1, asm.R6),
				asm.Mov.Reg(asm.R2, asm.R0),
				asm.Sub.Imm(asm.R2, 4),
				asm.Mov.Reg(asm.R3, asm.R10),
				asm.Add.Imm(asm.R3, -8),
				asm.Mov.Imm(asm.R4, 4),
				asm.FnXdpStoreBytes.Call(),
				asm.JNE.Imm(asm.R0, 0, "drop"),
			)
		}
		in = append(in, asm.Mov.Imm(asm.R2, 0).WithSymbol("pass"))
		in = append(in, redirect(xsks)...)
	}
	if kind == progDefault {
		return in // no jump to "drop"
	}
	return append(in, drop...)
}
