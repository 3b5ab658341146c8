// Package vlan puts an 802.1Q VLAN interface on top of the NIC or bond
// (vlan.id), through rtnetlink, so that the address goes on the tagged
// interface: hosting providers hand a dedicated server its public address
// on a tagged VLAN of a trunk port.
package vlan

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/vishvananda/netlink"
)

// Netlink is the rtnetlink surface of the VLAN step; Kernel is the real
// one.
type Netlink interface {
	// AddVLAN creates name as VLAN id on parent and sets it up; an
	// existing name is left as it is.
	AddVLAN(name, parent string, id int) error
	// VLAN reads back name's parent, tag and whether it is up.
	VLAN(name string) (parent string, id int, up bool, err error)
}

// VLAN is one VLAN interface to make.
type VLAN struct {
	Parent string
	ID     int
	NL     Netlink
}

// Name is the VLAN interface's name: parent.id, as ip(8) and ifupdown
// name them ("bond0.100"), cut to the kernel's 15 characters.
func (v VLAN) Name() string {
	n := v.Parent + "." + strconv.Itoa(v.ID)
	if len(n) > 15 {
		n = "vlan" + strconv.Itoa(v.ID)
	}
	return n
}

// Step creates the VLAN interface and brings it up (step vlan).
func (v VLAN) Step() boot.Step {
	return boot.Step{Name: "vlan", Apply: func(_ context.Context, d boot.Detail) error {
		d["name"], d["parent"], d["id"] = v.Name(), v.Parent, strconv.Itoa(v.ID)
		if err := v.NL.AddVLAN(v.Name(), v.Parent, v.ID); err != nil {
			return fmt.Errorf("add vlan %d on %s: %w", v.ID, v.Parent, err)
		}
		return nil
	}, Verify: func(context.Context, boot.Detail) error {
		p, id, up, err := v.NL.VLAN(v.Name())
		switch {
		case err != nil:
			return fmt.Errorf("vlan %s: %w", v.Name(), err)
		case p != v.Parent || id != v.ID:
			return fmt.Errorf("%s is vlan %d on %s, want %d on %s", v.Name(), id, p, v.ID, v.Parent)
		case !up:
			return fmt.Errorf("%s is down", v.Name())
		}
		return nil
	}}
}

// Kernel is the running kernel's rtnetlink (github.com/vishvananda/netlink).
type Kernel struct{}

// AddVLAN implements Netlink.
func (Kernel) AddVLAN(name, parent string, id int) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		p, err := netlink.LinkByName(parent)
		if err != nil {
			return err
		}
		l = &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: p.Attrs().Index},
			VlanId: id, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q}
		if err := netlink.LinkAdd(l); err != nil {
			return err
		}
	}
	return netlink.LinkSetUp(l)
}

// VLAN implements Netlink.
func (Kernel) VLAN(name string) (string, int, bool, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return "", 0, false, err
	}
	v, ok := l.(*netlink.Vlan)
	if !ok {
		return "", 0, false, fmt.Errorf("%s is a %s, not a vlan", name, l.Type())
	}
	p, err := netlink.LinkByIndex(v.ParentIndex)
	if err != nil {
		return "", 0, false, fmt.Errorf("parent of %s: %w", name, err)
	}
	return p.Attrs().Name, v.VlanId, v.RawFlags&1 != 0, nil
}
