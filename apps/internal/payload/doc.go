// Package payload is the datagram format xdpgen sends and xdprecv checks:
// a 16-byte header (magic, flow, sequence number) followed by a pattern
// that depends on the sequence number, so a receiver can tell loss,
// reordering, duplication and corruption apart.
//
//	0      4      6      8              16
//	| magic | flow | size | sequence     | pattern ...
//
// Byte k of the payload (k >= 16) is byte(seq + k). A sender takes the
// pattern from one precomputed buffer (Pattern) with no per-packet work.
package payload
