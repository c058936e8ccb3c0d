package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"time"
)

// pcapWriter writes the libpcap file format with nanosecond timestamps: a
// 24-byte global header (magic 0xa1b23c4d, version 2.4, zone 0, sigfigs 0,
// snaplen, link type 1 = Ethernet) and per packet a 16-byte record header
// (seconds, nanoseconds, captured length, original length) and the
// captured bytes. It writes little-endian, which readers detect from the
// magic (tcpdump, Wireshark and gopacket's pcapgo read it).
type pcapWriter struct {
	w       *bufio.Writer
	snaplen int
	rec     [16]byte
	err     error
}

const (
	linkTypeEthernet = 1
	pcapMagicNanos   = 0xa1b23c4d // 0xa1b2c3d4 would mean microseconds
)

func newPcapWriter(w io.Writer, snaplen int) (*pcapWriter, error) {
	p := &pcapWriter{w: bufio.NewWriterSize(w, 1<<20), snaplen: snaplen}
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], pcapMagicNanos)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], uint32(snaplen))
	binary.LittleEndian.PutUint32(h[20:], linkTypeEthernet)
	_, err := p.w.Write(h[:])
	return p, err
}

// write records one packet; it allocates nothing. The first error sticks.
func (p *pcapWriter) write(t time.Time, b []byte) {
	if p.err != nil {
		return
	}
	n := min(len(b), p.snaplen)
	binary.LittleEndian.PutUint32(p.rec[0:], uint32(t.Unix()))
	binary.LittleEndian.PutUint32(p.rec[4:], uint32(t.Nanosecond()))
	binary.LittleEndian.PutUint32(p.rec[8:], uint32(n))
	binary.LittleEndian.PutUint32(p.rec[12:], uint32(len(b)))
	if _, err := p.w.Write(p.rec[:]); err != nil {
		p.err = err
		return
	}
	if _, err := p.w.Write(b[:n]); err != nil {
		p.err = err
	}
}

func (p *pcapWriter) flush() error {
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}
