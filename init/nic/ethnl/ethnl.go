// Package ethnl makes the ethtool netlink requests that the ioctl library
// the init uses (github.com/safchain/ethtool) cannot: the ioctl ring
// parameters (ETHTOOL_GRINGPARAM, struct ethtool_ringparam) stop at the
// ring sizes, and the transmit push buffer length that ENA's LLQ header
// limit rests on (ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, Linux 6.5) exists only
// in the netlink interface (Documentation/networking/ethtool-netlink.rst,
// RINGS_GET and RINGS_SET). No maintained Go library sends RINGS_SET:
// mdlayher/ethtool covers link info, link modes, link state, WoL, FEC and
// private flags only. So the two messages are built here, on
// mdlayher/genetlink (already in the module for the netdev family's queue
// statistics), with the attribute numbers of golang.org/x/sys/unix.
package ethnl

import (
	"errors"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Rings is what RINGS_GET reports, as far as the init uses it.
type Rings struct {
	RxMax, TxMax, Rx, Tx uint32
	// TxPush is ETHTOOL_A_RINGS_TX_PUSH: the driver pushes packets (or
	// their headers) to the device through its memory (ENA's LLQ).
	TxPush bool
	// TxPushBufLen and TxPushBufLenMax are the push buffer's length and
	// the largest the device offers. The kernel reports both only when
	// the maximum is not zero (net/ethtool/rings.c rings_fill_reply):
	// TxPushBufLenMax 0 means the device offers no choice.
	TxPushBufLen, TxPushBufLenMax uint32
}

// header is ETHTOOL_A_*_HEADER, the request header nest: the device by
// name (ETHTOOL_A_HEADER_DEV_NAME, NUL-terminated string), no flags.
func header(nae *netlink.AttributeEncoder, ifname string) error {
	nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, ifname)
	return nil
}

// RingsGetRequest is RINGS_GET for one device: the header alone.
func RingsGetRequest(ifname string) (genetlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_RINGS_HEADER, func(nae *netlink.AttributeEncoder) error { return header(nae, ifname) })
	b, err := ae.Encode()
	if err != nil {
		return genetlink.Message{}, err
	}
	return genetlink.Message{Header: genetlink.Header{Command: unix.ETHTOOL_MSG_RINGS_GET, Version: unix.ETHTOOL_GENL_VERSION}, Data: b}, nil
}

// SetTxPushBufLenRequest is RINGS_SET changing the push buffer length
// only: ethnl_set_rings starts from the driver's current parameters and
// changes only the attributes present (net/ethtool/rings.c), and a value
// equal to the current one changes nothing (no device reset).
func SetTxPushBufLenRequest(ifname string, n uint32) (genetlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_RINGS_HEADER, func(nae *netlink.AttributeEncoder) error { return header(nae, ifname) })
	ae.Uint32(unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, n)
	b, err := ae.Encode()
	if err != nil {
		return genetlink.Message{}, err
	}
	return genetlink.Message{Header: genetlink.Header{Command: unix.ETHTOOL_MSG_RINGS_SET, Version: unix.ETHTOOL_GENL_VERSION}, Data: b}, nil
}

// ParseRings reads a RINGS_GET reply's attributes. Attributes it does not
// know (a newer kernel's) are skipped.
func ParseRings(m genetlink.Message) (Rings, error) {
	if m.Header.Command != unix.ETHTOOL_MSG_RINGS_GET_REPLY {
		return Rings{}, fmt.Errorf("ethnl: reply command %d, want RINGS_GET_REPLY (%d)", m.Header.Command, unix.ETHTOOL_MSG_RINGS_GET_REPLY)
	}
	ad, err := netlink.NewAttributeDecoder(m.Data)
	if err != nil {
		return Rings{}, err
	}
	var r Rings
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_RINGS_RX_MAX:
			r.RxMax = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX_MAX:
			r.TxMax = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_RX:
			r.Rx = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX:
			r.Tx = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX_PUSH:
			r.TxPush = ad.Uint8() != 0
		case unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN:
			r.TxPushBufLen = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN_MAX:
			r.TxPushBufLenMax = ad.Uint32()
		}
	}
	return r, ad.Err()
}

// Client sends the requests on a generic netlink socket.
type Client struct {
	c      *genetlink.Conn
	family uint16
}

// ErrNoFamily is returned by Dial on a kernel without ethtool netlink
// (CONFIG_ETHTOOL_NETLINK off).
var ErrNoFamily = errors.New("ethnl: no ethtool generic netlink family (kernel without CONFIG_ETHTOOL_NETLINK)")

// Dial opens a generic netlink socket and resolves the ethtool family.
func Dial() (*Client, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("ethnl: %w", err)
	}
	return New(c)
}

// New resolves the ethtool family on c and takes c over (closing it on
// failure).
func New(c *genetlink.Conn) (*Client, error) {
	f, err := c.GetFamily(unix.ETHTOOL_GENL_NAME)
	if err != nil {
		c.Close()
		if errors.Is(err, unix.ENOENT) {
			return nil, ErrNoFamily
		}
		return nil, fmt.Errorf("ethnl: family %s: %w", unix.ETHTOOL_GENL_NAME, err)
	}
	return &Client{c: c, family: f.ID}, nil
}

// Close closes the socket.
func (c *Client) Close() error { return c.c.Close() }

// Rings is RINGS_GET for ifname.
func (c *Client) Rings(ifname string) (Rings, error) {
	req, err := RingsGetRequest(ifname)
	if err != nil {
		return Rings{}, err
	}
	msgs, err := c.c.Execute(req, c.family, netlink.Request)
	if err != nil {
		return Rings{}, fmt.Errorf("ethnl: rings get %s: %w", ifname, err)
	}
	if len(msgs) != 1 {
		return Rings{}, fmt.Errorf("ethnl: rings get %s: %d replies", ifname, len(msgs))
	}
	return ParseRings(msgs[0])
}

// SetTxPushBufLen is RINGS_SET of the push buffer length, acknowledged.
func (c *Client) SetTxPushBufLen(ifname string, n uint32) error {
	req, err := SetTxPushBufLenRequest(ifname, n)
	if err != nil {
		return err
	}
	if _, err := c.c.Execute(req, c.family, netlink.Request|netlink.Acknowledge); err != nil {
		return fmt.Errorf("ethnl: rings set %s tx-push-buf-len %d: %w", ifname, n, err)
	}
	return nil
}
