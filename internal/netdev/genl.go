package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The netdev generic-netlink family: Documentation/netlink/specs/netdev.yaml
// in the kernel tree, include/uapi/linux/netdev.h.
const (
	netdevFamilyName    = "netdev"
	netdevFamilyVersion = 1

	netdevCmdDevGet   = 1
	netdevCmdQueueGet = 10 // Linux 6.8
	netdevCmdNAPIGet  = 11 // Linux 6.8
	netdevCmdNAPISet  = 14 // Linux 6.13

	// attribute-set dev
	netdevAttrDevIfindex           = 1
	netdevAttrDevPad               = 2
	netdevAttrDevXDPFeatures       = 3
	netdevAttrDevXDPZCMaxSegs      = 4
	netdevAttrDevXDPRxMetaFeatures = 5
	netdevAttrDevXSKFeatures       = 6

	// attribute-set napi
	netdevAttrNAPIIfindex           = 1
	netdevAttrNAPIID                = 2
	netdevAttrNAPIIRQ               = 3
	netdevAttrNAPIPID               = 4
	netdevAttrNAPIDeferHardIRQs     = 5 // u32, at most S32_MAX; Linux 6.13
	netdevAttrNAPIGROFlushTimeout   = 6 // uint (4 or 8 bytes), ns; Linux 6.13
	netdevAttrNAPIIRQSuspendTimeout = 7 // uint (4 or 8 bytes), ns; Linux 6.14

	// attribute-set queue
	netdevAttrQueueID      = 1
	netdevAttrQueueIfindex = 2
	netdevAttrQueueType    = 3
	netdevAttrQueueNAPIID  = 4
)

var ne = binary.NativeEndian

// genlTimeout bounds one call (dial, family lookup, request, replies).
const genlTimeout = 5 * time.Second

// errFamilyMissing means the kernel has no netdev family (before 6.3).
var errFamilyMissing = errors.New("generic netlink family \"netdev\" not present")

// conn is a generic-netlink socket in the calling thread's namespace with
// the netdev family resolved. mdlayher/netlink creates the socket on the
// calling thread (no Config.NetNS), so it belongs to that thread's
// namespace; after that the socket is the namespace's whatever thread
// reads it.
type conn struct {
	c      *genetlink.Conn
	family uint16
}

var (
	familyMu sync.Mutex
	familyID uint16 // the netdev family's id once resolved; ids are global, not per namespace
)

func dialNetdev() (*conn, error) {
	c, err := genetlink.Dial(nil)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		// No generic netlink at all: no netdev family either.
		return nil, fmt.Errorf("%w: %w", errFamilyMissing, err)
	}
	if err != nil {
		return nil, fmt.Errorf("netdev: dial generic netlink: %w", err)
	}
	// Extended acks carry the kernel's reason for an EINVAL; best effort.
	// Not NETLINK_CAP_ACK: mdlayher/netlink reads the extended-ack
	// attributes after the echoed request's full length, which a capped
	// ack does not carry ("not enough data for netlink error code").
	_ = c.SetOption(netlink.ExtendedAcknowledge, true)
	if err := c.SetDeadline(time.Now().Add(genlTimeout)); err != nil {
		c.Close()
		return nil, fmt.Errorf("netdev: generic netlink deadline: %w", err)
	}

	familyMu.Lock()
	defer familyMu.Unlock()
	if familyID == 0 {
		f, err := c.GetFamily(netdevFamilyName)
		if errors.Is(err, unix.ENOENT) {
			c.Close()
			return nil, errFamilyMissing
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("resolve generic netlink family %q: %w", netdevFamilyName, err)
		}
		familyID = f.ID
	}
	return &conn{c: c, family: familyID}, nil
}

func (c *conn) Close() error { return c.c.Close() }

func request(cmd uint8, ae *netlink.AttributeEncoder) (genetlink.Message, error) {
	m := genetlink.Message{Header: genetlink.Header{Command: cmd, Version: netdevFamilyVersion}}
	if ae != nil {
		b, err := ae.Encode()
		if err != nil {
			return m, err
		}
		m.Data = b
	}
	return m, nil
}

// get sends a "do" request whose answer is one reply message. It asks for
// no ACK: the reply and the ACK would come in two datagrams, and the
// library's Receive reads one.
func (c *conn) get(cmd uint8, ae *netlink.AttributeEncoder) (genetlink.Message, error) {
	m, err := request(cmd, ae)
	if err != nil {
		return m, err
	}
	replies, err := c.c.Execute(m, c.family, netlink.Request)
	if err != nil {
		return genetlink.Message{}, err
	}
	if len(replies) != 1 {
		return genetlink.Message{}, fmt.Errorf("netdev: %d replies to command %d, want 1", len(replies), cmd)
	}
	return replies[0], nil
}

// set sends a "do" request that has no reply message and waits for the ACK.
func (c *conn) set(cmd uint8, ae *netlink.AttributeEncoder) error {
	m, err := request(cmd, ae)
	if err != nil {
		return err
	}
	_, err = c.c.Execute(m, c.family, netlink.Request|netlink.Acknowledge)
	return err
}

// dump sends a dump request and returns every reply message.
//
// The netdev family's dump replies lack NLM_F_MULTI (they are put with
// genlmsg_iput, flags 0), and mdlayher/netlink reads past the first
// datagram only when a message carries that flag. So a dump larger than
// one datagram (about 60 NAPIs) would end early. The kernel queues the
// next part of a dump, or its NLMSG_DONE, from within the recvmsg that
// consumed the previous part (netlink_recvmsg -> netlink_dump), and the
// library's Receive stops at NLMSG_DONE. So: receive until the socket has
// nothing queued after a Receive.
func (c *conn) dump(cmd uint8, ae *netlink.AttributeEncoder) ([]genetlink.Message, error) {
	m, err := request(cmd, ae)
	if err != nil {
		return nil, err
	}
	req, err := c.c.Send(m, c.family, netlink.Request|netlink.Dump)
	if err != nil {
		return nil, err
	}
	var all []genetlink.Message
	for {
		gm, nm, err := c.c.Receive()
		if err != nil {
			return nil, err
		}
		if err := netlink.Validate(req, nm); err != nil {
			return nil, err
		}
		all = append(all, gm...)
		more, err := c.pending()
		if err != nil {
			return nil, err
		}
		if !more {
			return all, nil
		}
	}
}

// pending reports whether a datagram is queued on the socket, without
// blocking.
func (c *conn) pending() (bool, error) {
	rc, err := c.c.SyscallConn()
	if err != nil {
		return false, err
	}
	var more bool
	var rerr error
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true
	})
	switch {
	case err != nil:
		return false, err
	case rerr == nil:
		more = true
	case errors.Is(rerr, unix.EAGAIN):
	default:
		return false, fmt.Errorf("netdev: peek generic netlink socket: %w", rerr)
	}
	return more, nil
}

// uintAttr reads a YNL "uint" attribute: 4 or 8 bytes (nla_put_uint).
func uintAttr(ad *netlink.AttributeDecoder) (uint64, error) {
	b := ad.Bytes()
	switch len(b) {
	case 4:
		return uint64(ne.Uint32(b)), nil
	case 8:
		return ne.Uint64(b), nil
	}
	return 0, fmt.Errorf("netdev: uint attribute %d of %d bytes", ad.Type(), len(b))
}

// u32Attr reads a u32 attribute, checking its length.
func u32Attr(ad *netlink.AttributeDecoder, what string) (uint32, error) {
	b := ad.Bytes()
	if len(b) != 4 {
		return 0, fmt.Errorf("netdev: %s attribute of %d bytes, want 4", what, len(b))
	}
	return ne.Uint32(b), nil
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
	c, err := dialNetdev()
	if err != nil {
		return devFeatures{}, err
	}
	defer c.Close()
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAttrDevIfindex, uint32(ifindex))
	reply, err := c.get(netdevCmdDevGet, ae)
	if err != nil {
		return devFeatures{}, fmt.Errorf("netdev dev-get ifindex %d: %w", ifindex, err)
	}
	return parseDevGet(reply.Data, ifindex)
}

// parseDevGet decodes the attributes of a dev-get reply. The u64 feature
// attributes are put with nla_put_u64_64bit, so a PAD attribute may sit in
// front of them; it is skipped like any unknown attribute.
func parseDevGet(b []byte, ifindex int) (devFeatures, error) {
	var f devFeatures
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return f, fmt.Errorf("netdev: dev-get reply: %w", err)
	}
	gotIndex := false
	for ad.Next() {
		switch ad.Type() {
		case netdevAttrDevIfindex:
			v, err := u32Attr(ad, "ifindex")
			if err != nil {
				return f, err
			}
			if got := int(v); got != ifindex {
				return f, fmt.Errorf("netdev: reply for ifindex %d, asked for %d", got, ifindex)
			}
			gotIndex = true
		case netdevAttrDevXDPFeatures, netdevAttrDevXSKFeatures, netdevAttrDevXDPRxMetaFeatures:
			b := ad.Bytes()
			if len(b) != 8 {
				return f, fmt.Errorf("netdev: attribute %d of %d bytes, want 8", ad.Type(), len(b))
			}
			v := ne.Uint64(b)
			switch ad.Type() {
			case netdevAttrDevXDPFeatures:
				f.xdp = XDPFeatures(v)
			case netdevAttrDevXSKFeatures:
				f.xsk = XSKFeatures(v)
			default:
				f.rxMeta = RxMetadataFeatures(v)
			}
		case netdevAttrDevXDPZCMaxSegs:
			v, err := u32Attr(ad, "xdp-zc-max-segs")
			if err != nil {
				return f, err
			}
			f.zcMaxSegs = v
		}
	}
	if err := ad.Err(); err != nil {
		return f, err
	}
	if !gotIndex {
		return f, errors.New("netdev: reply without ifindex")
	}
	return f, nil
}
