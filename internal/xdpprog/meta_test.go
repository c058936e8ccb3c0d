package xdpprog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"encoding/binary"
	"github.com/cilium/ebpf/btf"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/test/vethns"
)

// runMeta runs p's program over a redirected UDP frame with room for
// metadata in front and returns the verdict and the bytes from data_meta
// to data (nil if the program wrote none).
func runMeta(t *testing.T, p *Program) (uint32, []byte) {
	t.Helper()
	pkt := udp4(dstV4, 9000).bytes()
	out := make([]byte, len(pkt)+256)
	var ctxOut xdpMD
	ret, err := p.prog.Run(&ebpf.RunOptions{
		Data:       pkt,
		DataOut:    out,
		Context:    xdpMD{Data: 0, DataEnd: uint32(len(pkt))},
		ContextOut: &ctxOut,
		Repeat:     1,
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	// The kernel copies out from data_meta; ctxOut's offsets are relative
	// to it.
	return ret, out[ctxOut.DataMeta:ctxOut.Data]
}

func nowTAI(t *testing.T) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_TAI, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// TestMetaXDPTime: without a device to bind to, the program writes the
// XDP-time-only record: magic, the XDP time flag, a CLOCK_TAI time
// between two readings around the run, and no device fields.
func TestMetaXDPTime(t *testing.T) {
	requireBPF(t)
	p := loadRegistered(t, &Config{Metadata: true})
	level, why := p.Metadata()
	if level != MetaXDPTimeOnly || why == nil {
		t.Fatalf("Metadata() = %v, %v; want %v with a reason", level, why, MetaXDPTimeOnly)
	}
	before := nowTAI(t)
	ret, meta := runMeta(t, p)
	after := nowTAI(t)
	if ret != retRedirect {
		t.Fatalf("verdict %s, want XDP_REDIRECT", retName(ret))
	}
	if len(meta) != MetaLen {
		t.Fatalf("metadata %d bytes, want %d", len(meta), MetaLen)
	}
	le := binary.LittleEndian // hosts we run on; the record is host order
	if m := le.Uint32(meta[28:]); m != MetaMagic {
		t.Errorf("magic %#x, want %#x", m, MetaMagic)
	}
	if f := le.Uint32(meta[24:]); f != MetaXDPTime {
		t.Errorf("flags %#x, want %#x (XDP time only)", f, MetaXDPTime)
	}
	if ts := le.Uint64(meta[8:]); ts < before || ts > after {
		t.Errorf("XDP time %d not within [%d, %d]", ts, before, after)
	}

	// A packet the filter passes gets no metadata.
	pf := loadRegistered(t, &Config{Metadata: true, Filter: &Filter{DstPorts: []uint16{1}}})
	if ret, meta := runMeta(t, pf); ret != retPass || len(meta) != 0 {
		t.Errorf("passed packet: %s with %d bytes of metadata, want XDP_PASS without", retName(ret), len(meta))
	}

	// Nor does a matching packet on a queue without a socket, which
	// bpf_redirect_map passes to the stack: the record is taken back off
	// (left on, the skb would carry it, and GRO merges no two packets
	// whose metadata differ).
	nosock := load(t, &Config{Metadata: true})
	if ret, meta := runMeta(t, nosock); ret != retPass || len(meta) != 0 {
		t.Errorf("packet without a socket: %s with %d bytes of metadata, want XDP_PASS without", retName(ret), len(meta))
	}
}

// TestMetaOff: without Config.Metadata the program is the plain one.
func TestMetaOff(t *testing.T) {
	requireBPF(t)
	p := loadRegistered(t, nil)
	if level, why := p.Metadata(); level != MetaNone || why != nil {
		t.Errorf("Metadata() = %v, %v", level, why)
	}
	if ret, meta := runMeta(t, p); ret != retRedirect || len(meta) != 0 {
		t.Errorf("%s with %d bytes of metadata, want XDP_REDIRECT without", retName(ret), len(meta))
	}
	plain, withMeta := len(instructions(nil, nil)), len(instructions(nil, &metaPlan{level: MetaKfuncs, tsID: 1, hashID: 2}))
	if withMeta <= plain {
		t.Errorf("metadata program %d instructions, plain %d", withMeta, plain)
	}
}

// TestMetaKfuncsFound: this kernel (6.3+ with BTF) has both kfuncs.
func TestMetaKfuncsFound(t *testing.T) {
	requireBPF(t)
	ts, hash, err := kfuncIDs()
	if err != nil && errors.Is(err, btf.ErrNotFound) && !kfuncsInBTF(t) {
		vethns.NotApplicable(t, "RX metadata kfuncs", err.Error())
		return
	}
	if err != nil || ts == 0 || hash == 0 {
		t.Fatalf("kfuncIDs() = %d, %d, %v", ts, hash, err)
	}
}

// kfuncsInBTF reports whether the kernel's BTF names both RX metadata
// kfuncs: a byte search of /sys/kernel/btf/vmlinux, independent of the
// lookup under test.
func kfuncsInBTF(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Fatalf("the kernel's BTF: %v", err)
	}
	return bytes.Contains(b, []byte(kfuncRXTimestamp+"\x00")) && bytes.Contains(b, []byte(kfuncRXHash+"\x00"))
}

// TestMetaFallbackLoad: where the kfuncs are missing from the kernel's
// BTF (before 6.3), or the device-bound load fails (here: an interface
// index that does not exist), Load falls back to the XDP-time-only
// program and says why.
func TestMetaFallbackLoad(t *testing.T) {
	requireBPF(t)
	t.Run("no-kfuncs", func(t *testing.T) {
		defer func(f func() (btf.TypeID, btf.TypeID, error)) { kfuncLookup = f }(kfuncLookup)
		kfuncLookup = func() (btf.TypeID, btf.TypeID, error) {
			return 0, 0, fmt.Errorf("kfunc %s: %w", kfuncRXHash, btf.ErrNotFound)
		}
		p := load(t, &Config{Metadata: true, Ifindex: 1})
		if level, why := p.Metadata(); level != MetaXDPTimeOnly || !errors.Is(why, btf.ErrNotFound) {
			t.Errorf("Metadata() = %v, %v; want %v because of the missing kfunc", level, why, MetaXDPTimeOnly)
		}
	})
	t.Run("bad-ifindex", func(t *testing.T) {
		p := load(t, &Config{Metadata: true, Ifindex: 1 << 30})
		level, why := p.Metadata()
		if level == MetaXDPTimeOnly && errors.Is(why, btf.ErrNotFound) && !kfuncsInBTF(t) {
			// No kfuncs: Load falls back before it tries a device.
			vethns.NotApplicable(t, "RX metadata kfuncs", why.Error())
			return
		}
		if level != MetaXDPTimeOnly || why == nil || !strings.Contains(why.Error(), "device-bound load") {
			t.Errorf("Metadata() = %v, %v; want %v because the device-bound load failed", level, why, MetaXDPTimeOnly)
		}
	})
}
