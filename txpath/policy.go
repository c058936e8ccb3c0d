package txpath

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Policy says how a Sender copies payloads into the UMEM and who computes
// the L4 (UDP, TCP) checksum.
type Policy uint8

const (
	// Auto lets New choose from the device facts and the NT calibration;
	// see Decision. As an Options.Policy it means "the Sender's policy".
	Auto Policy = iota
	// Offload requests the checksum through AF_XDP TX metadata
	// (XDP_TX_METADATA, XDP_TXMD_FLAGS_CHECKSUM) with the checksum field
	// pre-filled with the pseudo-header sum; the device, or in copy mode
	// the kernel, completes it. Payloads are copied with NT stores from the
	// Sender's NT threshold on (Decision.NTFrom), with ordinary stores
	// below it. The UMEM needs TxMetadataLen >= umem.TxMetadataSize. On a
	// software device (veth, ...) with tx-checksumming on, nothing
	// finishes the checksum: Decision.Warning says so.
	Offload
	// Software computes the checksum in the same pass as the copy
	// (csum.CopyAndSum, ordinary stores) and writes it into the header.
	Software
	// NT forces nontemporal stores for every payload copy (nt.Copy), like
	// MSG_NTCOPY: for data the CPU will not read again. The checksum is
	// offloaded when offload finishes it on this socket
	// (Decision.CanOffload), else summed in software from the source
	// slices (which the CPU has in cache), not from the frame.
	NT
	// Plain copies with ordinary stores and fills no L4 checksum: for
	// frames whose checksum is already right or not needed. SendUDP over
	// IPv4 sends a zero ("no checksum") UDP checksum; over IPv6, where zero
	// is not allowed, it fails with ErrPolicy.
	Plain
)

// String names the policy.
func (p Policy) String() string {
	switch p {
	case Auto:
		return "auto"
	case Offload:
		return "offload"
	case Software:
		return "software"
	case NT:
		return "nt"
	case Plain:
		return "plain"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy is the inverse of Policy.String.
func ParsePolicy(s string) (Policy, error) {
	for p := Auto; p <= Plain; p++ {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return Auto, fmt.Errorf("%w: unknown policy %q", ErrPolicy, s)
}

// Device are the facts about the interface that the auto policy uses.
type Device struct {
	// TxCsumOffload: the device computes L4 checksums of skbs
	// (ethtool tx-checksumming).
	TxCsumOffload bool
	// XSKTxChecksum: the driver honours XDP_TXMD_FLAGS_CHECKSUM on
	// zero-copy AF_XDP sockets (netdev xsk-features tx-checksum).
	XSKTxChecksum bool
	// Software: the device's checksum offload is software that finishes
	// nothing (veth, netkit, tun/tap, macvlan, ipvlan, bridge, dummy): it
	// passes the CHECKSUM_PARTIAL skb on with only the pseudo-header sum
	// in the checksum field. A kernel stack behind it accepts the frame;
	// an XDP program or AF_XDP socket sees the unfinished field.
	Software bool
	// Kind names the device kind or driver ("veth", "mlx5_core", ...),
	// for Decision's reasons.
	Kind string
}

// Decision is the policy a Sender uses by default, and why.
type Decision struct {
	Policy Policy // never Auto
	// NTFrom is the payload size from which the Offload policy copies with
	// nontemporal stores; 0 means never.
	NTFrom int
	// CanOffload reports whether checksum offload through TX metadata
	// gives a finished checksum on the wire on this socket (and so
	// whether the NT policy offloads).
	CanOffload bool
	// Unfinished reports that an offload request on this socket leaves
	// the wire with an unfinished checksum (the pseudo-header sum): a
	// software device with tx-checksumming on, without
	// XDP_UMEM_TX_SW_CSUM. Auto then sums in software; an explicit
	// Offload is obeyed, with Warning set.
	Unfinished bool
	// SwCsum reports that the UMEM has XDP_UMEM_TX_SW_CSUM: the kernel
	// finishes requested checksums in software.
	SwCsum   bool
	ZeroCopy bool
	Device   Device
	Reason   string
	// Warning is set when the policy sends frames whose checksum an XDP
	// receiver will find unfinished.
	Warning string
}

// String says what the Sender chose and why, on one line.
func (d Decision) String() string {
	nt := "never"
	if d.NTFrom > 0 {
		nt = fmt.Sprintf("from %d B", d.NTFrom)
	}
	s := fmt.Sprintf("txpath: %s (NT stores %s): %s", d.Policy, nt, d.Reason)
	if d.Warning != "" {
		s += "; WARNING: " + d.Warning
	}
	return s
}

// decide resolves the policy for a UMEM without XDP_UMEM_TX_SW_CSUM. want
// is the configured policy, metadata whether the UMEM has a TX metadata
// area, ntThreshold the calibrated NT threshold (or nt.Never), asked only
// when needed.
func decide(want Policy, zc, metadata bool, dev Device, ntThreshold func() int) (Decision, error) {
	return decideUMEM(want, zc, metadata, false, dev, ntThreshold, nil)
}

// swCosts returns the cost of a 1500-byte payload into a hot frame: the
// fused copy-and-sum, and a copy followed by a second pass that sums (what
// XDP_UMEM_TX_SW_CSUM makes the kernel do after its copy into the skb,
// with its own, generic, checksum code). It reads ChooseTable's point when
// the table is built, and otherwise measures that one point, once per
// process: a copy-mode Sender needs no more of the table.
func swCosts() (fused, copySum float64) {
	if t := chosen.Load(); t != nil {
		for _, p := range t.points {
			if !p.Cold && p.Size == 1500 {
				return p.Ns[MethodFused], p.Ns[MethodCopySum]
			}
		}
	}
	swPointOnce.Do(func() {
		swPoint = measureFrames([]int{1500}, hotBytes, hotTrialBytes, false, 50*time.Millisecond)[0]
	})
	return swPoint.Ns[MethodFused], swPoint.Ns[MethodCopySum]
}

var (
	swPointOnce sync.Once
	swPoint     TablePoint
)

// decideUMEM is decide with swCsum, whether the UMEM has
// XDP_UMEM_TX_SW_CSUM, and costs, which measures the fused software sum
// against a copy plus a summing pass (asked only when Auto must choose
// between them; nil means swCosts).
func decideUMEM(want Policy, zc, metadata, swCsum bool, dev Device, ntThreshold func() int, costs func() (float64, float64)) (Decision, error) {
	d := Decision{ZeroCopy: zc, Device: dev, SwCsum: swCsum && !zc}
	var why []string
	kind := dev.Kind
	if kind == "" {
		kind = "this device"
	}
	// In copy mode the kernel builds an skb and marks it CHECKSUM_PARTIAL:
	// a NIC's driver has the hardware finish the checksum; the stack
	// finishes it in software when the device does not offload; a
	// software device (veth, ...) passes it on unfinished. With
	// XDP_UMEM_TX_SW_CSUM the kernel finishes it while building the skb.
	// In zero-copy mode the driver must support the request itself.
	switch {
	case !metadata:
		why = append(why, "the UMEM has no TX metadata area (TxMetadataLen < umem.TxMetadataSize), so no checksum offload")
	case zc && !dev.XSKTxChecksum:
		why = append(why, "zero-copy and the driver lacks the xsk tx-checksum feature, so no checksum offload")
	case zc:
		d.CanOffload = true
		why = append(why, "zero-copy with xsk tx-checksum: the NIC completes the checksum")
	case d.SwCsum:
		d.CanOffload = true
		why = append(why, "copy mode and XDP_UMEM_TX_SW_CSUM: the kernel finishes requested checksums in software while it builds the skb")
	case dev.Software && dev.TxCsumOffload:
		d.Unfinished = true
		why = append(why, fmt.Sprintf("copy mode on %s, a software device, with tx-checksumming on: an offloaded checksum would leave unfinished "+
			"(CHECKSUM_PARTIAL, the pseudo-header sum in the field) and only a kernel stack would accept it, not an XDP program or AF_XDP socket", kind))
	case dev.TxCsumOffload:
		d.CanOffload = true
		why = append(why, "copy mode and tx-checksumming on: the kernel marks the skb CHECKSUM_PARTIAL and the device completes it")
	default:
		d.CanOffload = true
		why = append(why, "copy mode, tx-checksumming off: metadata works but the stack would sum again after the copy")
	}
	if zc && d.CanOffload {
		th := ntThreshold()
		if th > 0 {
			d.NTFrom = th
			why = append(why, fmt.Sprintf("the NIC reads the frame by DMA: NT stores from %d B (Config.NTThreshold, else nt's calibration)", th))
		} else {
			why = append(why, "no NT stores (Config.NTThreshold negative, or no size where they win in nt's calibration)")
		}
	} else if !zc {
		why = append(why, "copy mode: the kernel copies the frame out of the UMEM on this CPU at once, so NT stores would push to memory what is read back right away")
	}
	unfinishedWarning := func(p Policy) string {
		return fmt.Sprintf("%s on %s (a software device) with tx-checksumming on sends unfinished checksums: "+
			"an XDP program or AF_XDP socket behind it sees the pseudo-header sum in the checksum field (csum.Partial tells it from a wrong one); "+
			"use the software policy, turn tx-checksumming off, or register the UMEM with TxSwCsum", p, kind)
	}
	switch want {
	case Auto:
		switch {
		case d.CanOffload && zc:
			d.Policy = Offload
		case d.CanOffload && d.SwCsum && dev.Software:
			// Both finish the checksum in software: ours in the copy's
			// pass, or the kernel's after its copy. Take the cheaper.
			if costs == nil {
				costs = swCosts
			}
			fused, copySum := costs()
			if copySum > 0 && copySum < fused {
				d.Policy = Offload
				why = append(why, fmt.Sprintf("software device: XDP_UMEM_TX_SW_CSUM (a copy, then the kernel's summing pass: %.0f ns at 1500 B) beats the fused copy-and-sum (%.0f ns, measured once per process)", copySum, fused))
			} else {
				d.Policy = Software
				why = append(why, fmt.Sprintf("software device: the fused copy-and-sum (%.0f ns at 1500 B) beats XDP_UMEM_TX_SW_CSUM, a copy and then the kernel's summing pass (%.0f ns, measured once per process)", fused, copySum))
			}
		case d.CanOffload && dev.TxCsumOffload:
			// Offload when something other than the stack's software
			// fallback completes the checksum.
			d.Policy = Offload
		case d.Unfinished:
			d.Policy = Software
			why = append(why, "so the checksum is summed in software, in the copy's pass")
		default:
			d.Policy = Software
		}
	case Offload:
		if !metadata {
			return d, fmt.Errorf("%w: offload policy", ErrNoMetadata)
		}
		if !d.CanOffload && !d.Unfinished {
			return d, fmt.Errorf("%w: offload policy: %s", ErrNotSupported, strings.Join(why, "; "))
		}
		d.Policy = Offload
		why = append([]string{"offload configured"}, why...)
		if d.Unfinished {
			d.Warning = unfinishedWarning(Offload)
		}
	case Software, NT, Plain:
		d.Policy = want
		why = append([]string{want.String() + " configured"}, why...)
		if want == NT && d.Unfinished {
			why = append(why, "so NT sums in software")
		}
	default:
		return d, fmt.Errorf("%w: %d", ErrPolicy, int(want))
	}
	d.Reason = strings.Join(why, "; ")
	return d, nil
}
