package rxpath

// Front returns the bytes of the packet's first frame in front of its
// data: the kernel's XDP_PACKET_HEADROOM and the UMEM's headroom, less
// what an XDP program took with bpf_xdp_adjust_head. An XDP program's own
// metadata (bpf_xdp_adjust_meta) is the last bytes of Front: a program
// that reserved n bytes left them in Front()[len(Front())-n:]. Like Data
// it is valid only until Receive returns, also for a copied packet (the
// frame goes back to the kernel after Receive returns). xdpkit's own
// record (Config.Metadata) is such metadata too; its accessors read it.
func (p *Packet) Front() []byte { return p.front }
