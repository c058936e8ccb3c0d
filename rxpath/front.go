package rxpath

// Front returns the bytes of the packet's first frame in front of its
// data. In copy mode the kernel copies each packet to a fixed place in
// the frame (xsk_copy_xdp: the UMEM's headroom plus XDP_PACKET_HEADROOM,
// 256 bytes), so Front is always that long there, whatever the program
// did with bpf_xdp_adjust_head, and holds nothing the kernel wrote except
// the metadata below. Only in zero-copy mode, where the program runs on
// the frame itself, does bpf_xdp_adjust_head move the data and with it
// Front's end: a program that took n bytes of headroom shortens Front by
// n. An XDP program's own metadata (bpf_xdp_adjust_meta), which the
// kernel copies along in copy mode, is the last bytes of Front in both
// modes: a program that reserved n bytes left them in
// Front()[len(Front())-n:]. Like Data it is valid only until Receive
// returns, also for a copied packet (the frame goes back to the kernel
// after Receive returns). xdpkit's own record (Config.Metadata) is such
// metadata too; its accessors read it.
func (p *Packet) Front() []byte { return p.front }
