package xdpprog

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// LoadPass loads an XDP program that passes every packet to the kernel
// and has no maps. Some drivers send AF_XDP zero-copy frames only while
// a native XDP program is attached (their ndo_xsk_wakeup refuses
// otherwise); a socket that only transmits attaches this one. Attach and
// Close work as for Load's programs; Register has no XSKMAP to write.
func LoadPass() (*Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "xdpkit_pass",
		Type:         ebpf.XDP,
		AttachType:   ebpf.AttachXDP,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()},
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		return nil, wrap("load pass program", capsLoad, err)
	}
	return &Program{prog: prog}, nil
}
