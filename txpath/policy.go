package txpath

import (
	"fmt"
	"strings"
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
	// below it. The UMEM needs TxMetadataLen >= umem.TxMetadataSize.
	Offload
	// Software computes the checksum in the same pass as the copy
	// (csum.CopyAndSum, ordinary stores) and writes it into the header.
	Software
	// NT forces nontemporal stores for every payload copy (nt.Copy), like
	// MSG_NTCOPY: for data the CPU will not read again. The checksum is
	// offloaded when the Sender can offload, else summed in software from
	// the source slices (which the CPU has in cache), not from the frame.
	NT
	// Plain copies with ordinary stores and fills no L4 checksum: for
	// frames whose checksum is already right or not needed. SendUDP over
	// IPv4 sends a zero ("no checksum") UDP checksum; over IPv6, where zero
	// is not allowed, it fails with ErrPolicy.
	Plain
)

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
}

// Decision is the policy a Sender uses by default, and why.
type Decision struct {
	Policy Policy // never Auto
	// NTFrom is the payload size from which the Offload policy copies with
	// nontemporal stores; 0 means never.
	NTFrom int
	// CanOffload reports whether checksum offload through TX metadata is
	// possible on this socket (and so whether the NT policy offloads).
	CanOffload bool
	ZeroCopy   bool
	Device     Device
	Reason     string
}

func (d Decision) String() string {
	nt := "never"
	if d.NTFrom > 0 {
		nt = fmt.Sprintf("from %d B", d.NTFrom)
	}
	return fmt.Sprintf("txpath: %s (NT stores %s): %s", d.Policy, nt, d.Reason)
}

// decide resolves the policy. want is the configured policy, metadata
// whether the UMEM has a TX metadata area, ntThreshold the calibrated NT
// threshold (or nt.Never), asked only when needed.
func decide(want Policy, zc, metadata bool, dev Device, ntThreshold func() int) (Decision, error) {
	d := Decision{ZeroCopy: zc, Device: dev}
	var why []string
	// In copy mode the kernel builds an skb and marks it CHECKSUM_PARTIAL:
	// the device finishes the checksum, or the stack does in software
	// when the device cannot. In zero-copy mode the driver must support
	// the request itself.
	switch {
	case !metadata:
		why = append(why, "the UMEM has no TX metadata area (TxMetadataLen < umem.TxMetadataSize), so no checksum offload")
	case zc && !dev.XSKTxChecksum:
		why = append(why, "zero-copy and the driver lacks the xsk tx-checksum feature, so no checksum offload")
	case zc:
		d.CanOffload = true
		why = append(why, "zero-copy with xsk tx-checksum: the NIC completes the checksum")
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
			why = append(why, fmt.Sprintf("the NIC reads the frame by DMA and NT stores win from %d B here (nt calibration)", th))
		} else {
			why = append(why, "NT stores did not win at any size in nt's calibration")
		}
	} else if !zc {
		why = append(why, "copy mode: the kernel copies the frame out of the UMEM on this CPU at once, so NT stores would push to memory what is read back right away")
	}
	switch want {
	case Auto:
		// Offload when something other than the stack's software fallback
		// completes the checksum; else the fused copy-and-sum.
		if d.CanOffload && (zc || dev.TxCsumOffload) {
			d.Policy = Offload
		} else {
			d.Policy = Software
		}
	case Offload:
		if !metadata {
			return d, fmt.Errorf("%w: offload policy", ErrNoMetadata)
		}
		if !d.CanOffload {
			return d, fmt.Errorf("%w: offload policy: %s", ErrNotSupported, strings.Join(why, "; "))
		}
		d.Policy = Offload
		why = append([]string{"offload configured"}, why...)
	case Software, NT, Plain:
		d.Policy = want
		why = append([]string{want.String() + " configured"}, why...)
	default:
		return d, fmt.Errorf("%w: %d", ErrPolicy, int(want))
	}
	d.Reason = strings.Join(why, "; ")
	return d, nil
}
