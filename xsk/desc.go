package xsk

// Desc is an RX or TX descriptor (struct xdp_desc): a packet, or one
// buffer of a multi-buffer packet, at Addr in the UMEM.
type Desc struct {
	Addr    uint64 // UMEM address of the data (frame start + offset)
	Len     uint32 // bytes of data
	Options uint32 // OptContd, OptTxMetadata
}

// Descriptor options.
const (
	// OptContd (XDP_PKT_CONTD) marks a buffer that the next descriptor
	// continues: all but the last buffer of a multi-buffer packet.
	OptContd = 1 << 0
	// OptTxMetadata (XDP_TX_METADATA) says a umem.TxMetadata precedes the
	// packet on TX.
	OptTxMetadata = 1 << 1
)
