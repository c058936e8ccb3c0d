package pcapfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// MaxPacket is the largest captured packet the Reader accepts.
const MaxPacket = 256 << 10

// ErrFormat is returned for a file that is not pcap or pcapng, or is
// corrupt.
var ErrFormat = errors.New("pcapfile: not a valid pcap or pcapng file")

// Link types of the packets (LINKTYPE_*).
const LinkTypeEthernet = 1

// Packet is one captured packet. Data is valid until the next call of
// Reader.Next.
type Packet struct {
	Data     []byte
	Time     int64 // ns since the Unix epoch
	OrigLen  int   // the packet's length on the wire (>= len(Data))
	LinkType uint16
}

// Reader reads packets from a pcap or pcapng stream.
type Reader struct {
	r     *bufio.Reader
	buf   []byte
	hdr   [28]byte
	bo    binary.ByteOrder
	ng    bool
	nsec  bool   // pcap: nanosecond timestamps
	link  uint16 // pcap: the file's link type
	ifs   []iface
	count uint64
}

type iface struct {
	link    uint16
	snap    uint32
	resol   uint8 // if_tsresol
	decimal bool
}

const (
	blockSHB = 0x0A0D0D0A
	blockIDB = 1
	blockPB  = 2
	blockSPB = 3
	blockEPB = 6
	bomMagic = 0x1A2B3C4D
)

// NewReader reads the file's header from r and returns a Reader of its
// packets. r is read through a 256 KiB buffer.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 256<<10), buf: make([]byte, 0, 2048)}
	if err := rd.header(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Reset makes r read a new stream from src (the same file again, for a
// replay in a loop), keeping its buffers.
func (r *Reader) Reset(src io.Reader) error {
	r.r.Reset(src)
	r.ng, r.nsec, r.ifs, r.count = false, false, r.ifs[:0], 0
	return r.header()
}

func (rd *Reader) header() error {
	var m [4]byte
	if _, err := io.ReadFull(rd.r, m[:]); err != nil {
		return fmt.Errorf("%w: reading the header: %w", ErrFormat, err)
	}
	le, be := binary.LittleEndian.Uint32(m[:]), binary.BigEndian.Uint32(m[:])
	switch {
	case le == blockSHB:
		rd.ng = true
		return rd.section()
	case le == 0xa1b2c3d4 || le == 0xa1b23c4d:
		rd.bo, rd.nsec = binary.LittleEndian, le == 0xa1b23c4d
	case be == 0xa1b2c3d4 || be == 0xa1b23c4d:
		rd.bo, rd.nsec = binary.BigEndian, be == 0xa1b23c4d
	default:
		return fmt.Errorf("%w: magic %x", ErrFormat, m)
	}
	if _, err := io.ReadFull(rd.r, rd.hdr[:20]); err != nil {
		return fmt.Errorf("%w: reading the header: %w", ErrFormat, err)
	}
	rd.link = uint16(rd.bo.Uint32(rd.hdr[16:]))
	return nil
}

// Count is the number of packets read so far.
func (r *Reader) Count() uint64 { return r.count }

// Next returns the next packet, or io.EOF after the last.
func (r *Reader) Next() (Packet, error) {
	if r.ng {
		return r.nextNG()
	}
	h := r.hdr[:16]
	if _, err := io.ReadFull(r.r, h); err != nil {
		if err == io.EOF {
			return Packet{}, io.EOF
		}
		return Packet{}, fmt.Errorf("%w: record %d: %w", ErrFormat, r.count, err)
	}
	sec, frac := uint64(r.bo.Uint32(h[0:])), uint64(r.bo.Uint32(h[4:]))
	capLen, origLen := r.bo.Uint32(h[8:]), r.bo.Uint32(h[12:])
	if !r.nsec {
		frac *= 1000
	}
	data, err := r.read(int64(capLen))
	if err != nil {
		return Packet{}, err
	}
	r.count++
	return Packet{Data: data, Time: int64(sec*1e9 + frac), OrigLen: int(max(origLen, capLen)), LinkType: r.link}, nil
}

// read reads n bytes of packet data into the reused buffer.
func (r *Reader) read(n int64) ([]byte, error) {
	if n < 0 || n > MaxPacket {
		return nil, fmt.Errorf("%w: record %d: captured length %d above %d", ErrFormat, r.count, n, MaxPacket)
	}
	if int(n) > cap(r.buf) {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		return nil, fmt.Errorf("%w: record %d truncated: %w", ErrFormat, r.count, noEOF(err))
	}
	return b, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// section reads a Section Header Block whose type was just read.
func (r *Reader) section() error {
	var h [8]byte // total length, byte-order magic
	if _, err := io.ReadFull(r.r, h[:]); err != nil {
		return fmt.Errorf("%w: section header: %w", ErrFormat, noEOF(err))
	}
	switch {
	case binary.LittleEndian.Uint32(h[4:]) == bomMagic:
		r.bo = binary.LittleEndian
	case binary.BigEndian.Uint32(h[4:]) == bomMagic:
		r.bo = binary.BigEndian
	default:
		return fmt.Errorf("%w: section header: byte-order magic %x", ErrFormat, h[4:])
	}
	total := r.bo.Uint32(h[0:])
	if total < 28 || total%4 != 0 || total > 1<<24 {
		return fmt.Errorf("%w: section header length %d", ErrFormat, total)
	}
	r.ifs = r.ifs[:0]
	_, err := r.r.Discard(int(total) - 12)
	if err != nil {
		return fmt.Errorf("%w: section header: %w", ErrFormat, noEOF(err))
	}
	return nil
}

func (r *Reader) nextNG() (Packet, error) {
	for {
		h := r.hdr[:8]
		if _, err := io.ReadFull(r.r, h); err != nil {
			if err == io.EOF {
				return Packet{}, io.EOF
			}
			return Packet{}, fmt.Errorf("%w: block header: %w", ErrFormat, err)
		}
		typ := r.bo.Uint32(h[0:])
		if binary.LittleEndian.Uint32(h[0:]) == blockSHB {
			// The byte order may change here: reread from the length.
			if err := r.resection(h[4:8]); err != nil {
				return Packet{}, err
			}
			continue
		}
		total := int64(r.bo.Uint32(h[4:]))
		if total < 12 || total%4 != 0 || total > MaxPacket+4096 {
			return Packet{}, fmt.Errorf("%w: block type %#x length %d", ErrFormat, typ, total)
		}
		body := total - 12
		switch typ {
		case blockIDB:
			if body < 8 {
				return Packet{}, fmt.Errorf("%w: interface block length %d", ErrFormat, total)
			}
			b, err := r.read(body + 4)
			if err != nil {
				return Packet{}, err
			}
			ifc := iface{link: r.bo.Uint16(b[0:]), snap: r.bo.Uint32(b[4:]), resol: 6, decimal: true}
			r.options(b[8:body], &ifc)
			r.ifs = append(r.ifs, ifc)
			continue
		case blockEPB, blockPB:
			if body < 20 {
				return Packet{}, fmt.Errorf("%w: packet block length %d", ErrFormat, total)
			}
			fh := r.hdr[8:28]
			if _, err := io.ReadFull(r.r, fh); err != nil {
				return Packet{}, fmt.Errorf("%w: packet block: %w", ErrFormat, noEOF(err))
			}
			id := r.bo.Uint32(fh[0:])
			if typ == blockPB {
				id = uint32(r.bo.Uint16(fh[0:]))
			}
			if int(id) >= len(r.ifs) {
				return Packet{}, fmt.Errorf("%w: packet of interface %d of %d", ErrFormat, id, len(r.ifs))
			}
			ts := uint64(r.bo.Uint32(fh[4:]))<<32 | uint64(r.bo.Uint32(fh[8:]))
			capLen, origLen := int64(r.bo.Uint32(fh[12:])), int64(r.bo.Uint32(fh[16:]))
			padded := (capLen + 3) &^ 3
			if padded > body-20 {
				return Packet{}, fmt.Errorf("%w: packet block: captured length %d in a %d-byte block", ErrFormat, capLen, total)
			}
			data, err := r.read(capLen)
			if err != nil {
				return Packet{}, err
			}
			if _, err := r.r.Discard(int(body-20-capLen) + 4); err != nil {
				return Packet{}, fmt.Errorf("%w: packet block: %w", ErrFormat, noEOF(err))
			}
			ifc := &r.ifs[id]
			r.count++
			return Packet{Data: data, Time: ifc.nanos(ts), OrigLen: int(max(origLen, capLen)), LinkType: ifc.link}, nil
		case blockSPB:
			if body < 4 || len(r.ifs) == 0 {
				return Packet{}, fmt.Errorf("%w: simple packet block (length %d, %d interfaces)", ErrFormat, total, len(r.ifs))
			}
			var ol [4]byte
			if _, err := io.ReadFull(r.r, ol[:]); err != nil {
				return Packet{}, fmt.Errorf("%w: simple packet block: %w", ErrFormat, noEOF(err))
			}
			origLen := int64(r.bo.Uint32(ol[:]))
			capLen := min(origLen, body-4)
			if s := int64(r.ifs[0].snap); s > 0 {
				capLen = min(capLen, s)
			}
			data, err := r.read(capLen)
			if err != nil {
				return Packet{}, err
			}
			if _, err := r.r.Discard(int(body-4-capLen) + 4); err != nil {
				return Packet{}, fmt.Errorf("%w: simple packet block: %w", ErrFormat, noEOF(err))
			}
			r.count++
			return Packet{Data: data, OrigLen: int(origLen), LinkType: r.ifs[0].link}, nil
		default:
			if _, err := r.r.Discard(int(body) + 4); err != nil {
				return Packet{}, fmt.Errorf("%w: block type %#x: %w", ErrFormat, typ, noEOF(err))
			}
		}
	}
}

// resection reads the rest of a Section Header Block after its type
// and length (len4, in the new section's byte order).
func (r *Reader) resection(len4 []byte) error {
	var m [4]byte
	if _, err := io.ReadFull(r.r, m[:]); err != nil {
		return fmt.Errorf("%w: section header: %w", ErrFormat, noEOF(err))
	}
	switch {
	case binary.LittleEndian.Uint32(m[:]) == bomMagic:
		r.bo = binary.LittleEndian
	case binary.BigEndian.Uint32(m[:]) == bomMagic:
		r.bo = binary.BigEndian
	default:
		return fmt.Errorf("%w: section header: byte-order magic %x", ErrFormat, m)
	}
	total := r.bo.Uint32(len4)
	if total < 28 || total%4 != 0 || total > 1<<24 {
		return fmt.Errorf("%w: section header length %d", ErrFormat, total)
	}
	r.ifs = r.ifs[:0]
	if _, err := r.r.Discard(int(total) - 12); err != nil {
		return fmt.Errorf("%w: section header: %w", ErrFormat, noEOF(err))
	}
	return nil
}

// options reads an interface's options for if_tsresol.
func (r *Reader) options(b []byte, ifc *iface) {
	for len(b) >= 4 {
		code, n := r.bo.Uint16(b[0:]), int(r.bo.Uint16(b[2:]))
		if code == 0 || 4+n > len(b) {
			return
		}
		if code == 9 && n == 1 {
			v := b[4]
			ifc.decimal, ifc.resol = v&0x80 == 0, v&0x7f
		}
		b = b[min(len(b), 4+(n+3)&^3):]
	}
}

var pow10 = [...]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// nanos converts a timestamp in the interface's units to nanoseconds.
func (ifc *iface) nanos(ts uint64) int64 {
	if ifc.decimal {
		switch {
		case ifc.resol <= 9:
			return int64(ts * pow10[9-ifc.resol])
		case int(ifc.resol) < len(pow10):
			return int64(ts / pow10[ifc.resol-9])
		}
		return 0
	}
	if ifc.resol >= 64 {
		return 0
	}
	hi, lo := bits.Mul64(ts, 1e9)
	if hi >= 1<<ifc.resol {
		return 0 // out of range
	}
	q, _ := bits.Div64(hi, lo, 1<<ifc.resol)
	return int64(q)
}
