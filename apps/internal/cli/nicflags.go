package cli

import (
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/xdpkit/xdpkit/xsk"
)

// NICFlags are the flags every app has for real NICs: the UMEM frame
// size, and the filter flags of the apps that receive.
type NICFlags struct {
	FrameSize                          int
	srcPorts, srcPrefixes, dstPrefixes string
	vlans, etherTypes                  string
	keepMgmt                           bool
}

// Register adds -frame-size and, with filters, -src-port, -src-prefix,
// -dst-prefix, -vlan, -ethertype and -keep-mgmt.
func (f *NICFlags) Register(fs *flag.FlagSet, filters bool) {
	fs.IntVar(&f.FrameSize, "frame-size", 0, "UMEM frame size, 2048 or 4096 (0: 4096 where the driver needs page-sized frames for zero-copy, 2048 otherwise)")
	if !filters {
		return
	}
	fs.StringVar(&f.srcPorts, "src-port", "", "only packets from these UDP/TCP source ports, e.g. 53,33434-33534")
	fs.StringVar(&f.srcPrefixes, "src-prefix", "", "only packets from these prefixes, e.g. 198.18.0.0/15,2001:db8::/32")
	fs.StringVar(&f.dstPrefixes, "dst-prefix", "", "only packets to these prefixes")
	fs.StringVar(&f.vlans, "vlan", "", "only frames with one VLAN tag of these IDs, e.g. 100,200")
	fs.StringVar(&f.etherTypes, "ethertype", "", "also these non-IP EtherTypes, whole frames, e.g. 0x88b5")
	fs.BoolVar(&f.keepMgmt, "keep-mgmt", false, "keep ARP, SSH and the host's own addresses in the kernel")
}

// Frame returns the frame size for the interface: -frame-size, or 4096
// where the driver table says the driver needs page-sized frames.
func (f *NICFlags) Frame(iface string) (int, error) {
	if f.FrameSize != 0 {
		if f.FrameSize != xsk.FrameSizeDefault && f.FrameSize != xsk.FrameSizePage {
			return 0, fmt.Errorf("-frame-size %d: want 2048 or 4096", f.FrameSize)
		}
		return f.FrameSize, nil
	}
	if info, err := xsk.Device(iface); err == nil {
		if d, ok := xsk.Driver(info.Driver); ok && d.PageFrames {
			return xsk.FrameSizePage, nil
		}
	}
	return xsk.FrameSizeDefault, nil
}

// Filter adds the filter flags to base (which it changes and returns).
func (f *NICFlags) Filter(base *xsk.Filter) (*xsk.Filter, error) {
	var err error
	for _, p := range split(f.srcPorts) {
		lo, hi, ok := strings.Cut(p, "-")
		a, err1 := strconv.ParseUint(lo, 10, 16)
		b := a
		var err2 error
		if ok {
			b, err2 = strconv.ParseUint(hi, 10, 16)
		}
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("-src-port %q: want a port or a range like 33434-33534", p)
		}
		if ok {
			base.SrcPortRanges = append(base.SrcPortRanges, xsk.PortRange{First: uint16(a), Last: uint16(b)})
		} else {
			base.SrcPorts = append(base.SrcPorts, uint16(a))
		}
	}
	if base.SrcPrefixes, err = prefixes("-src-prefix", f.srcPrefixes, base.SrcPrefixes); err != nil {
		return nil, err
	}
	if base.DstPrefixes, err = prefixes("-dst-prefix", f.dstPrefixes, base.DstPrefixes); err != nil {
		return nil, err
	}
	for _, v := range split(f.vlans) {
		n, err := strconv.ParseUint(v, 10, 12)
		if err != nil {
			return nil, fmt.Errorf("-vlan %q: want an ID 0-4095", v)
		}
		base.VLANs = append(base.VLANs, uint16(n))
	}
	for _, e := range split(f.etherTypes) {
		n, err := strconv.ParseUint(e, 0, 16)
		if err != nil {
			return nil, fmt.Errorf("-ethertype %q: want a number such as 0x88b5", e)
		}
		base.EtherTypes = append(base.EtherTypes, uint16(n))
	}
	if f.keepMgmt {
		return xsk.KeepManagement(base)
	}
	return base, nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func prefixes(flag, s string, to []netip.Prefix) ([]netip.Prefix, error) {
	for _, p := range split(s) {
		q, err := netip.ParsePrefix(p)
		if err != nil {
			if a, aerr := netip.ParseAddr(p); aerr == nil {
				q = netip.PrefixFrom(a, a.BitLen())
			} else {
				return nil, fmt.Errorf("%s %q: %w", flag, p, err)
			}
		}
		to = append(to, q)
	}
	return to, nil
}

// Explain adds to err, a set-up failure on iface, what xsk.Preflight
// finds wrong there with the commands that fix it; err itself when it
// finds nothing.
func Explain(iface string, queues, frameSize, frames int, err error) error {
	if err == nil {
		return nil
	}
	r, perr := xsk.Preflight(iface, &xsk.PreflightConfig{Queues: queues, FrameSize: frameSize, FrameCount: frames})
	if perr != nil || !r.Failed() {
		return err
	}
	return fmt.Errorf("%w\n%w (xdpdoctor -i %s says more)", err, r.Err(), iface)
}

// ErrPreflight matches the part of an Explain error that the preflight
// found.
var ErrPreflight = xsk.ErrPreflight
