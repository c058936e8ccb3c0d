package main

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/xdpkit/xdpkit/apps/internal/craft"
	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/test/vethns"
	"github.com/xdpkit/xdpkit/txpath"
	"github.com/xdpkit/xdpkit/umem"
	"github.com/xdpkit/xdpkit/xsk"
)

func TestMain(m *testing.M) {
	vethns.Exclusive()
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

// sink is a MAC no one has: the peer drops the frames right after the
// veth hop, and the measurement is the sender's.
var sink = net.HardwareAddr{0x02, 0xde, 0xad, 0, 0, 1}

// BenchmarkModes sends each mode's frames (64 bytes; SYNs 74 and 94)
// through veth in copy mode with the send loops xdpgen runs, flat out,
// and reports packets per second and allocations per packet (none).
func BenchmarkModes(b *testing.B) {
	vethns.Require(b)
	a, peer := vethns.NewNS(b), vethns.NewNS(b)
	p := vethns.NewPair(b, a, peer, nil)
	pcapFile := filepath.Join(b.TempDir(), "64.pcap")
	if err := writeBenchPcap(pcapFile, p); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mode craft.Mode
		v6   bool
		pcap bool
		flow bool // the UDPFlow path of plain -mode udp
	}{
		{name: "udp", flow: true},
		{name: "udp-engine", mode: craft.UDP},
		{name: "tcp-syn", mode: craft.TCPSyn},
		{name: "tcp-syn-v6", mode: craft.TCPSyn, v6: true},
		{name: "icmp-echo", mode: craft.ICMPEcho},
		{name: "raw", mode: craft.Raw},
		{name: "pcap", pcap: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			err := a.Do(func() error {
				u, err := umem.New(&umem.Config{FrameSize: 2048, FrameCount: 4096})
				if err != nil {
					return err
				}
				defer u.Close()
				sock, err := xsk.New(p.A.Name, 0, u, &xsk.Config{NoRX: true, TXSize: 2048, CompletionSize: 2048})
				if err != nil {
					return err
				}
				defer sock.Close()
				s, err := txpath.New(sock, &txpath.Config{Policy: txpath.Software})
				if err != nil {
					return err
				}
				defer s.Close()
				g := &gen{s: s, sizes: []int{64}, pat: payload.Pattern(2048)}
				src, dst := p.A.IPv4.Addr(), p.B.IPv4.Addr()
				if tc.v6 {
					src, dst = p.A.IPv6.Addr(), p.B.IPv6.Addr()
				}
				switch {
				case tc.flow:
					f, err := txpath.NewUDPFlow(p.A.MAC, sink, netip.AddrPortFrom(src, 10000), netip.AddrPortFrom(dst, 9000), nil)
					if err != nil {
						return err
					}
					g.flows, g.ids, g.seq, g.hdrLen = []*txpath.UDPFlow{f}, []uint16{0}, []uint64{0}, f.HeaderLen()
				case tc.pcap:
					c := &config{pcap: pcapFile, pcapTiming: "rate", mtu: 1500, ifaceMAC: p.A.MAC, nextMAC: sink}
					if g.rp, err = openReplay(c, 1514); err != nil {
						return err
					}
					defer g.rp.Close()
				default:
					cc := &craft.Config{Mode: tc.mode, EtherType: 0x88b5, Src: netip.PrefixFrom(src, src.BitLen()), Dst: netip.PrefixFrom(dst, dst.BitLen()),
						SrcPorts: craft.PortRange{First: 10000, Last: 10999}, DstPorts: craft.PortRange{First: 9000, Last: 9000},
						Order: craft.Random, Sizes: []int{64}}
					copy(cc.SrcMAC[:], p.A.MAC)
					copy(cc.DstMAC[:], sink)
					if g.b, err = craft.New(cc); err != nil {
						return err
					}
				}
				var sent, bytes atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				if tc.flow {
					err = g.send(context.Background(), uint64(b.N), 0, 64, &sent, &bytes)
				} else {
					err = g.sendFrames(context.Background(), uint64(b.N), &pacer{}, 64, &sent, &bytes)
				}
				if err != nil {
					return err
				}
				if err := s.Drain(context.Background()); err != nil {
					return err
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// writeBenchPcap writes 1000 64-byte UDP frames in pcap format (by hand:
// the package's own code writes no pcap).
func writeBenchPcap(path string, p *vethns.Pair) error {
	cc := &craft.Config{Mode: craft.UDP, Src: p.A.IPv4, Dst: p.B.IPv4, SrcPorts: craft.PortRange{First: 1, Last: 100},
		DstPorts: craft.PortRange{First: 9000, Last: 9000}, Sizes: []int{64}}
	bd, err := craft.New(cc)
	if err != nil {
		return err
	}
	out := make([]byte, 24, 24+1000*80)
	le := func(b []byte, v uint32) []byte { return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	copy(out, le(le(le(le(le(le(nil, 0xa1b2c3d4), 2|4<<16), 0), 0), 65535), 1))
	frame := make([]byte, 64)
	for i := range 1000 {
		n := bd.Build(frame)
		out = le(le(le(le(out, 0), uint32(i)), uint32(n)), uint32(n))
		out = append(out, frame[:n]...)
	}
	return os.WriteFile(path, out, 0o600)
}
