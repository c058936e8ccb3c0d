package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The netdev generic-netlink family (include/uapi/linux/netdev.h).
const (
	netdevFamilyName    = "netdev"
	netdevFamilyVersion = 1

	netdevCmdDevGet = 1

	netdevAttrDevIfindex           = 1
	netdevAttrDevPad               = 2
	netdevAttrDevXDPFeatures       = 3
	netdevAttrDevXDPZCMaxSegs      = 4
	netdevAttrDevXDPRxMetaFeatures = 5
	netdevAttrDevXSKFeatures       = 6
)

// Generic-netlink control family (include/uapi/linux/genetlink.h).
const (
	genlIDCtrl            = 0x10
	ctrlCmdGetFamily      = 3
	ctrlAttrFamilyID      = 1
	ctrlAttrFamilyName    = 2
	sizeofGenlmsghdr      = 4
	nlmsgerrAttrMsg       = 1 // NLMSGERR_ATTR_MSG
	nlaTypeMask           = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	genlRecvBufferSize    = 32 << 10
	genlReceiveTimeoutSec = 5
)

var ne = binary.NativeEndian

// errFamilyMissing means the kernel has no netdev family (before 6.3).
var errFamilyMissing = errors.New("generic netlink family \"netdev\" not present")

// genlConn is a NETLINK_GENERIC socket in the calling thread's namespace.
type genlConn struct {
	fd  int
	seq uint32
	buf []byte
}

func dialGenl() (*genlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, os.NewSyscallError("socket(AF_NETLINK, NETLINK_GENERIC)", err)
	}
	c := &genlConn{fd: fd, buf: make([]byte, genlRecvBufferSize)}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.Close()
		return nil, os.NewSyscallError("bind(AF_NETLINK)", err)
	}
	// Extended acks carry the kernel's reason for an EINVAL; best effort.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	tv := unix.Timeval{Sec: genlReceiveTimeoutSec}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		c.Close()
		return nil, os.NewSyscallError("setsockopt(SO_RCVTIMEO)", err)
	}
	return c, nil
}

func (c *genlConn) Close() error { return unix.Close(c.fd) }

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, val []byte) []byte {
	n := unix.NLA_HDRLEN + len(val)
	b := make([]byte, (n+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1))
	ne.PutUint16(b[0:], uint16(n))
	ne.PutUint16(b[2:], typ)
	copy(b[unix.NLA_HDRLEN:], val)
	return b
}

func u32(v uint32) []byte { b := make([]byte, 4); ne.PutUint32(b, v); return b }

// do sends one "do" request (with NLM_F_ACK) and returns the attributes
// of the reply messages of type family, read until the kernel's ACK.
func (c *genlConn) do(family uint16, cmd, version uint8, attrs ...[]byte) ([][]byte, error) {
	c.seq++
	seq := c.seq
	n := unix.NLMSG_HDRLEN + sizeofGenlmsghdr
	for _, a := range attrs {
		n += len(a)
	}
	msg := make([]byte, unix.NLMSG_HDRLEN, n)
	ne.PutUint32(msg[0:], uint32(n))
	ne.PutUint16(msg[4:], family)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(msg[8:], seq)
	ne.PutUint32(msg[12:], 0)             // port id: the kernel fills it in
	msg = append(msg, cmd, version, 0, 0) // genlmsghdr, reserved zero
	for _, a := range attrs {
		msg = append(msg, a...)
	}
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto(NETLINK_GENERIC)", err)
	}

	var replies [][]byte
	for {
		nr, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			return nil, os.NewSyscallError("recvfrom(NETLINK_GENERIC)", err)
		}
		b := c.buf[:nr]
		for len(b) >= unix.NLMSG_HDRLEN {
			l := int(ne.Uint32(b[0:]))
			typ := ne.Uint16(b[4:])
			flags := ne.Uint16(b[6:])
			mseq := ne.Uint32(b[8:])
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return nil, fmt.Errorf("netlink: truncated message (%d of %d bytes)", len(b), l)
			}
			body := b[unix.NLMSG_HDRLEN:l]
			b = b[min(len(b), (l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):]
			if mseq != seq {
				continue // a stale reply to an earlier request
			}
			switch typ {
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return nil, errors.New("netlink: short error message")
				}
				errno := -int32(ne.Uint32(body))
				if errno == 0 {
					return replies, nil // the ACK: done
				}
				err := error(unix.Errno(errno))
				if msg := extackMsg(body, flags); msg != "" {
					err = fmt.Errorf("%w (%s)", err, msg)
				}
				return nil, err
			case unix.NLMSG_DONE:
				return replies, nil
			case family:
				if len(body) < sizeofGenlmsghdr {
					return nil, errors.New("netlink: short generic netlink message")
				}
				replies = append(replies, append([]byte(nil), body[sizeofGenlmsghdr:]...))
			}
		}
	}
}

// extackMsg returns NLMSGERR_ATTR_MSG from an NLMSG_ERROR body: the error
// code, the echoed request (only its header with NETLINK_CAP_ACK), then
// the extended-ack attributes when NLM_F_ACK_TLVS is set.
func extackMsg(body []byte, flags uint16) string {
	if flags&unix.NLM_F_ACK_TLVS == 0 || len(body) < 4+unix.NLMSG_HDRLEN {
		return ""
	}
	echoed := unix.NLMSG_HDRLEN
	if flags&unix.NLM_F_CAPPED == 0 {
		echoed = int(ne.Uint32(body[4:]))
	}
	if 4+echoed > len(body) {
		return ""
	}
	for a, err := range parseAttrs(body[4+echoed:]) {
		if err != nil {
			return ""
		}
		if a.typ == nlmsgerrAttrMsg {
			return unix.ByteSliceToString(a.val)
		}
	}
	return ""
}

type nlAttr struct {
	typ uint16
	val []byte
}

// parseAttrs iterates over the netlink attributes in b.
func parseAttrs(b []byte) func(yield func(nlAttr, error) bool) {
	return func(yield func(nlAttr, error) bool) {
		for len(b) >= unix.NLA_HDRLEN {
			l := int(ne.Uint16(b[0:]))
			if l < unix.NLA_HDRLEN || l > len(b) {
				yield(nlAttr{}, fmt.Errorf("netlink: bad attribute length %d (%d bytes left)", l, len(b)))
				return
			}
			if !yield(nlAttr{typ: ne.Uint16(b[2:]) & nlaTypeMask, val: b[unix.NLA_HDRLEN:l]}, nil) {
				return
			}
			b = b[min(len(b), (l+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1)):]
		}
	}
}

var (
	familyMu sync.Mutex
	familyID uint16 // the netdev family's id once resolved; ids are global, not per namespace
)

// netdevFamily resolves the netdev family's id through nlctrl.
func (c *genlConn) netdevFamily() (uint16, error) {
	familyMu.Lock()
	defer familyMu.Unlock()
	if familyID != 0 {
		return familyID, nil
	}
	replies, err := c.do(genlIDCtrl, ctrlCmdGetFamily, 1, attr(ctrlAttrFamilyName, append([]byte(netdevFamilyName), 0)))
	if errors.Is(err, unix.ENOENT) {
		return 0, errFamilyMissing
	}
	if err != nil {
		return 0, fmt.Errorf("resolve generic netlink family %q: %w", netdevFamilyName, err)
	}
	for _, r := range replies {
		for a, err := range parseAttrs(r) {
			if err != nil {
				return 0, err
			}
			if a.typ == ctrlAttrFamilyID && len(a.val) == 2 {
				familyID = ne.Uint16(a.val)
				return familyID, nil
			}
		}
	}
	return 0, fmt.Errorf("resolve generic netlink family %q: no id in the reply", netdevFamilyName)
}

// devFeatures is the reply to NETDEV_CMD_DEV_GET.
type devFeatures struct {
	xdp       XDPFeatures
	xsk       XSKFeatures
	rxMeta    RxMetadataFeatures
	zcMaxSegs uint32
}

// getDevFeatures asks the netdev family about ifindex in the calling
// thread's namespace.
func getDevFeatures(ifindex int) (devFeatures, error) {
	c, err := dialGenl()
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		// No generic netlink at all: no netdev family either.
		return devFeatures{}, fmt.Errorf("%w: %w", errFamilyMissing, err)
	}
	if err != nil {
		return devFeatures{}, err
	}
	defer c.Close()
	id, err := c.netdevFamily()
	if err != nil {
		return devFeatures{}, err
	}
	replies, err := c.do(id, netdevCmdDevGet, netdevFamilyVersion, attr(netdevAttrDevIfindex, u32(uint32(ifindex))))
	if err != nil {
		return devFeatures{}, fmt.Errorf("netdev dev-get ifindex %d: %w", ifindex, err)
	}
	if len(replies) != 1 {
		return devFeatures{}, fmt.Errorf("netdev dev-get ifindex %d: %d replies, want 1", ifindex, len(replies))
	}
	return parseDevGet(replies[0], ifindex)
}

// parseDevGet decodes the attributes of a dev-get reply. The u64 feature
// attributes are put with nla_put_u64_64bit, so a PAD attribute may sit in
// front of them; it is skipped like any unknown attribute.
func parseDevGet(b []byte, ifindex int) (devFeatures, error) {
	var f devFeatures
	gotIndex := false
	for a, err := range parseAttrs(b) {
		if err != nil {
			return f, err
		}
		switch a.typ {
		case netdevAttrDevIfindex:
			if len(a.val) != 4 {
				return f, fmt.Errorf("netdev: ifindex attribute of %d bytes", len(a.val))
			}
			if got := int(ne.Uint32(a.val)); got != ifindex {
				return f, fmt.Errorf("netdev: reply for ifindex %d, asked for %d", got, ifindex)
			}
			gotIndex = true
		case netdevAttrDevXDPFeatures, netdevAttrDevXSKFeatures, netdevAttrDevXDPRxMetaFeatures:
			if len(a.val) != 8 {
				return f, fmt.Errorf("netdev: attribute %d of %d bytes, want 8", a.typ, len(a.val))
			}
			v := ne.Uint64(a.val)
			switch a.typ {
			case netdevAttrDevXDPFeatures:
				f.xdp = XDPFeatures(v)
			case netdevAttrDevXSKFeatures:
				f.xsk = XSKFeatures(v)
			default:
				f.rxMeta = RxMetadataFeatures(v)
			}
		case netdevAttrDevXDPZCMaxSegs:
			if len(a.val) != 4 {
				return f, fmt.Errorf("netdev: xdp-zc-max-segs attribute of %d bytes", len(a.val))
			}
			f.zcMaxSegs = ne.Uint32(a.val)
		}
	}
	if !gotIndex {
		return f, errors.New("netdev: reply without ifindex")
	}
	return f, nil
}
