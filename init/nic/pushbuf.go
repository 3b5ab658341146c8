package nic

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/nic/ethnl"
)

// PushBuffer is the ethtool netlink rings surface of the transmit push
// buffer (tx-push-buf-len). A Netlink that has it (the real one does)
// lets nic-tx-push-buf run; without it the step is skipped.
type PushBuffer interface {
	// TxPushBuf returns the push buffer's length and the largest the
	// device offers; max 0 means the device offers none.
	TxPushBuf(ifname string) (length, max uint32, err error)
	SetTxPushBufLen(ifname string, n uint32) error
}

// TxPushBuf implements PushBuffer with a RINGS_GET over a generic
// netlink socket opened for the call: the step asks twice per boot.
func (rtnl) TxPushBuf(ifname string) (uint32, uint32, error) {
	c, err := ethnl.Dial()
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	r, err := c.Rings(ifname)
	return r.TxPushBufLen, r.TxPushBufLenMax, err
}

// SetTxPushBufLen implements PushBuffer with a RINGS_SET.
func (rtnl) SetTxPushBufLen(ifname string, n uint32) error {
	c, err := ethnl.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SetTxPushBufLen(ifname, n)
}

// pushBufPlan is the push buffer length nic-tx-push-buf settled on.
type pushBufPlan struct {
	want uint32
}

// applyPushBuf sets the transmit push buffer to nic.tx_push_buf_len (224)
// where the device offers that much: ENA in LLQ mode pushes the packet
// headers through device memory and drops a packet whose headers exceed
// the buffer, 96 bytes on 6.12 unless set (see config.NIC.TxPushBufLen).
//
// It runs before link-up, right after the channels: on ENA a new length
// is a device reset (ena_update_queue_params: ena_destroy_device and
// ena_restore_device), which allocates the interrupt vectors anew, so
// everything per vector comes after it; on a device that is not up yet
// the reset costs no link flap. With large LLQ headers each LLQ entry
// is twice as large, so the device may offer fewer tx descriptors.
func (t *Tuner) applyPushBuf(p *pushBufPlan, d boot.Detail) error {
	if t.Opt.TxPushBufLen == 0 {
		return boot.Skip("nic.tx_push_buf_len=0")
	}
	pb, ok := t.Netlink.(PushBuffer)
	if !ok {
		return boot.Skip("no ethtool netlink rings surface")
	}
	cur, max, err := pb.TxPushBuf(t.Link.Name)
	if errors.Is(err, ethnl.ErrNoFamily) || unsupported(err) {
		return boot.Skip("driver %s reports no rings over ethtool netlink (%v)", t.Link.Driver, err)
	}
	if err != nil {
		return fmt.Errorf("ethtool rings %s: %w", t.Link.Name, err)
	}
	if max == 0 {
		return boot.Skip("driver %s offers no tx-push-buf-len (only ENA in LLQ mode does, Linux 6.5+)", t.Link.Driver)
	}
	want := uint32(t.Opt.TxPushBufLen)
	d["max"] = strconv.Itoa(int(max))
	d["before"] = strconv.Itoa(int(cur))
	if want > max {
		return boot.Skip("the device offers a push buffer of at most %d bytes, not %d: packets with longer headers "+
			"(an IPv6 ACK with timestamps and SACK has 98) are not pushed", max, want)
	}
	p.want = want
	if cur == want {
		d["changed"] = "no"
		return nil
	}
	if err := pb.SetTxPushBufLen(t.Link.Name, want); err != nil {
		if unsupported(err) {
			return boot.Skip("driver %s refuses tx-push-buf-len %d (%v)", t.Link.Driver, want, err)
		}
		return fmt.Errorf("ethtool rings %s tx-push-buf-len %d: %w", t.Link.Name, want, err)
	}
	d["changed"] = "yes"
	return nil
}

func (t *Tuner) verifyPushBuf(p *pushBufPlan, d boot.Detail) error {
	cur, _, err := t.Netlink.(PushBuffer).TxPushBuf(t.Link.Name)
	if err != nil {
		return fmt.Errorf("ethtool rings %s: %w", t.Link.Name, err)
	}
	d["tx_push_buf_len"] = strconv.Itoa(int(cur))
	if cur != p.want {
		return fmt.Errorf("tx-push-buf-len reads %d, want %d", cur, p.want)
	}
	return nil
}
