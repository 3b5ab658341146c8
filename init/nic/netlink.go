package nic

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// rtnl implements Netlink with github.com/vishvananda/netlink in the
// network namespace of the calling thread.
type rtnl struct{}

// NewNetlink returns the real Netlink surface.
func NewNetlink() Netlink { return rtnl{} }

func (rtnl) LinkSetUp(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

func (rtnl) LinkIsUp(name string) (bool, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return false, err
	}
	return l.Attrs().RawFlags&1 != 0, nil // IFF_UP
}

// Qdiscs implements Netlink.
func (rtnl) Qdiscs(name string) (string, []string, error) {
	return Qdiscs(name)
}

// Qdiscs returns the root qdisc kind of an interface and the kinds of the
// qdiscs directly under it.
func Qdiscs(name string) (string, []string, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return "", nil, err
	}
	qs, err := netlink.QdiscList(l)
	if err != nil {
		return "", nil, err
	}
	var root string
	var rootHandle uint32
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT {
			root, rootHandle = q.Type(), a.Handle
		}
	}
	var children []string
	for _, q := range qs {
		a := q.Attrs()
		if a.Parent != netlink.HANDLE_ROOT && a.Parent != netlink.HANDLE_INGRESS &&
			a.Parent&0xffff0000 == rootHandle&0xffff0000 {
			children = append(children, q.Type())
		}
	}
	return root, children, nil
}

func (rtnl) ReplaceRoot(name, kind string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	// mq, noqueue and pfifo_fast need no options (pfifo_fast_init ignores
	// them), so the generic qdisc (kind only) is the whole request.
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_ROOT},
		QdiscType:  kind,
	}
	if err := netlink.QdiscReplace(q); err != nil {
		return fmt.Errorf("replace root qdisc %s: %w", kind, err)
	}
	return nil
}

// QdiscStat is one qdisc of an interface and its counters (tc -s qdisc).
type QdiscStat struct {
	Kind     string // "mq", "pfifo_fast", "noqueue"
	Handle   string // "1:0"; noqueue's "0:0"
	Parent   string // "root", or the parent class ("1:2" is mq's tx-1)
	Drops    uint64 // packets the qdisc dropped (a full queue)
	Requeues uint64 // packets the driver gave back (a queue stopped after the qdisc dequeued)
	Backlog  uint64 // packets queued now
}

// QdiscStats lists the qdiscs of an interface with their counters. A
// noqueue qdisc counts nothing: its drops are the device's tx_dropped.
func QdiscStats(name string) ([]QdiscStat, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, err
	}
	qs, err := netlink.QdiscList(l)
	if err != nil {
		return nil, err
	}
	out := make([]QdiscStat, 0, len(qs))
	for _, q := range qs {
		a := q.Attrs()
		s := QdiscStat{Kind: q.Type(), Handle: netlink.HandleStr(a.Handle), Parent: netlink.HandleStr(a.Parent)}
		if a.Statistics != nil && a.Statistics.Queue != nil {
			s.Drops, s.Requeues, s.Backlog = uint64(a.Statistics.Queue.Drops), uint64(a.Statistics.Queue.Requeues), uint64(a.Statistics.Queue.Qlen)
		}
		out = append(out, s)
	}
	return out, nil
}
