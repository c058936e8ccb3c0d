// Package pcapfile reads pcap and pcapng capture files as a stream: one
// packet at a time into a buffer the Reader reuses, so a file larger than
// memory replays in a few hundred kilobytes and reading allocates nothing
// per packet.
//
// Formats: pcap with microsecond (magic 0xa1b2c3d4) or nanosecond
// (0xa1b23c4d) timestamps in either byte order; pcapng (Section Header,
// Interface Description, Enhanced and Simple Packet Blocks, the obsolete
// Packet Block; other blocks are skipped) in either byte order, several
// sections and interfaces, each interface's if_tsresol (powers of 10 or
// of 2). Timestamps come out as nanoseconds since the Unix epoch (a
// Simple Packet Block has none: 0).
//
// A record whose captured length exceeds MaxPacket, or a block that
// does not fit its own length, is ErrFormat: the Reader never allocates
// what a corrupt length asks for.
package pcapfile
