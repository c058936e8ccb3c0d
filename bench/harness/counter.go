package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// counter is the harness's own counting point: an XDP program attached
// (native mode) to an interface, which counts every frame in a per-CPU
// array and drops it. Neither benchmark program is involved: the harness
// loads it, attaches it and reads the map itself.
type counter struct {
	m    *ebpf.Map
	prog *ebpf.Program
	l    link.Link
}

// newCounter attaches a counter to ifname in ns.
func newCounter(ns *vethns.NS, ifname string) (_ *counter, err error) {
	c := &counter{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	c.m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "bench_count", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("counter map: %w", err)
	}
	// key = 0; v = lookup(map, &key); if v { *v += 1 }; return XDP_DROP
	// (per-CPU values: no atomic add needed).
	insns := asm.Instructions{
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, c.m.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("out"), // XDP_DROP
		asm.Return(),
	}
	c.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bench_count", Type: ebpf.XDP, License: "GPL", Instructions: insns})
	if err != nil {
		return nil, fmt.Errorf("counter program: %w", err)
	}
	err = ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		c.l, err = link.AttachXDP(link.XDPOptions{Program: c.prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attach the counter to %s: %w", ifname, err)
	}
	return c, nil
}

// read returns the count of every CPU.
func (c *counter) read() ([]uint64, error) {
	var v []uint64
	if err := c.m.Lookup(uint32(0), &v); err != nil {
		return nil, fmt.Errorf("read the counter: %w", err)
	}
	return v, nil
}

// total is the sum of read's counts.
func (c *counter) total() (uint64, error) {
	v, err := c.read()
	var t uint64
	for _, x := range v {
		t += x
	}
	return t, err
}

func (c *counter) Close() error {
	var errs []error
	if c.l != nil {
		errs = append(errs, c.l.Close())
	}
	if c.prog != nil {
		errs = append(errs, c.prog.Close())
	}
	if c.m != nil {
		errs = append(errs, c.m.Close())
	}
	return errors.Join(errs...)
}
