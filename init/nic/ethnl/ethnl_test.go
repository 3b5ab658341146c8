package ethnl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/genetlink/genltest"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The request bytes, written out from the layout the kernel documents
// (Documentation/networking/ethtool-netlink.rst "Request header" and
// "RINGS_SET"; include/uapi/linux/ethtool_netlink.h for the numbers) and
// the netlink attribute format (struct nlattr: u16 length including the 4
// header bytes, u16 type, data padded to 4 bytes; NLA_F_NESTED 0x8000 on
// a nest, which the kernel's strict validation of the ethtool family
// requires). Host byte order is little-endian on both targets (x86-64,
// arm64).
func TestRequestBytes(t *testing.T) {
	hdr := []byte{
		0x10, 0x00, 0x01, 0x80, // ETHTOOL_A_RINGS_HEADER (1) | NLA_F_NESTED, 16 bytes
		0x09, 0x00, 0x02, 0x00, // ETHTOOL_A_HEADER_DEV_NAME (2), 4 + 5 bytes
		'e', 't', 'h', '0', 0x00, 0x00, 0x00, 0x00, // "eth0\0", padded to 8
	}
	for _, tc := range []struct {
		name    string
		msg     func() (genetlink.Message, error)
		command uint8
		data    []byte
	}{
		{"get", func() (genetlink.Message, error) { return RingsGetRequest("eth0") }, 15, hdr},
		{"set 224", func() (genetlink.Message, error) { return SetTxPushBufLenRequest("eth0", 224) }, 16,
			append(append([]byte{}, hdr...),
				0x08, 0x00, 0x0f, 0x00, // ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN (15), u32
				0xe0, 0x00, 0x00, 0x00)}, // 224
	} {
		m, err := tc.msg()
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		// genlmsghdr: cmd, version ETHTOOL_GENL_VERSION (1), reserved u16.
		want := append([]byte{tc.command, 0x01, 0x00, 0x00}, tc.data...)
		if !bytes.Equal(b, want) {
			t.Errorf("%s:\n got % x\nwant % x", tc.name, b, want)
		}
	}
}

// enaReply is RINGS_GET_REPLY as 6.12 fills it for ENA in LLQ mode
// (net/ethtool/rings.c rings_fill_reply from ena_get_ringparam): ring
// sizes, tx-push on, rx-push off, then the push buffer's maximum and
// length, present because the maximum is not zero.
func enaReply(t *testing.T, bufLen, bufMax uint32) genetlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_RINGS_HEADER, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 2)
		nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, "eth0")
		return nil
	})
	ae.Uint32(unix.ETHTOOL_A_RINGS_RX_MAX, 16384)
	ae.Uint32(unix.ETHTOOL_A_RINGS_TX_MAX, 1024)
	ae.Uint32(unix.ETHTOOL_A_RINGS_RX, 1024)
	ae.Uint32(unix.ETHTOOL_A_RINGS_TX, 1024)
	ae.Uint8(unix.ETHTOOL_A_RINGS_TX_PUSH, 1)
	ae.Uint8(unix.ETHTOOL_A_RINGS_RX_PUSH, 0)
	if bufMax != 0 {
		ae.Uint32(unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN_MAX, bufMax)
		ae.Uint32(unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, bufLen)
	}
	ae.Uint32(99, 7) // an attribute of a newer kernel
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return genetlink.Message{Header: genetlink.Header{Command: unix.ETHTOOL_MSG_RINGS_GET_REPLY, Version: 1}, Data: b}
}

func TestParseRings(t *testing.T) {
	r, err := ParseRings(enaReply(t, 96, 224))
	if err != nil || r != (Rings{RxMax: 16384, TxMax: 1024, Rx: 1024, Tx: 1024, TxPush: true, TxPushBufLen: 96, TxPushBufLenMax: 224}) {
		t.Errorf("ParseRings = %+v, %v", r, err)
	}
	r, err = ParseRings(enaReply(t, 0, 0))
	if err != nil || r.TxPushBufLenMax != 0 || r.TxPushBufLen != 0 {
		t.Errorf("without a push buffer: %+v, %v", r, err)
	}
	if _, err := ParseRings(genetlink.Message{Header: genetlink.Header{Command: unix.ETHTOOL_MSG_CHANNELS_GET_REPLY}}); err == nil {
		t.Error("a channels reply parsed as rings")
	}
}

// TestClient: the family is resolved by name, the requests go to it with
// the right command and flags (RINGS_SET acknowledged), and the kernel's
// refusal comes back as its errno.
func TestClient(t *testing.T) {
	fam := genetlink.Family{ID: 0x1d, Name: unix.ETHTOOL_GENL_NAME, Version: 1}
	var set []uint32
	conn := genltest.Dial(genltest.ServeFamily(fam, func(g genetlink.Message, n netlink.Message) ([]genetlink.Message, error) {
		switch g.Header.Command {
		case unix.ETHTOOL_MSG_RINGS_GET:
			return []genetlink.Message{enaReply(t, 96, 224)}, nil
		case unix.ETHTOOL_MSG_RINGS_SET:
			if n.Header.Flags&netlink.Acknowledge == 0 {
				t.Error("RINGS_SET without NLM_F_ACK")
			}
			ad, _ := netlink.NewAttributeDecoder(g.Data)
			for ad.Next() {
				if ad.Type() == unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN {
					set = append(set, ad.Uint32())
				}
			}
			if set[len(set)-1] > 224 {
				return nil, genltest.Error(int(unix.EINVAL))
			}
			return nil, genltest.Error(0) // the acknowledgement
		}
		return nil, genltest.Error(int(unix.EOPNOTSUPP))
	}))
	c, err := New(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Rings("eth0")
	if err != nil || r.TxPushBufLenMax != 224 {
		t.Fatalf("Rings = %+v, %v", r, err)
	}
	if err := c.SetTxPushBufLen("eth0", 224); err != nil {
		t.Fatal(err)
	}
	if err := c.SetTxPushBufLen("eth0", 256); !errors.Is(err, unix.EINVAL) {
		t.Errorf("set 256: %v, want EINVAL", err)
	}
	if len(set) != 2 || set[0] != 224 {
		t.Errorf("sent %v", set)
	}
}
