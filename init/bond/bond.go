// Package bond makes bond0 over the NICs nic.match selected (bond.mode
// active-backup or 802.3ad) through rtnetlink, and reports its members and
// their link state as the bonding driver shows them in sysfs.
//
// The members are enslaved while down: the bonding driver refuses a member
// that is up ("Device can not be enslaved while up", bond_enslave in
// drivers/net/bonding/bond_main.c), so the bond steps run after NIC
// discovery and before the NIC tuning brings the links up; the bond
// itself comes up after the tuning (UpStep).
package bond

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/vishvananda/netlink"
)

// Name is the bond's interface name.
const Name = "bond0"

// Netlink is the rtnetlink surface of the bond steps; Kernel is the real
// one.
type Netlink interface {
	// AddBond creates the bond device (mode, miimon in ms) or, if one of
	// that name exists, sets its mode and miimon: a built-in bonding
	// driver makes bond0 itself at boot, in balance-rr (max_bonds=1,
	// bond_init in drivers/net/bonding/bond_main.c).
	AddBond(name string, mode config.BondMode, miimonMS int) error
	// Enslave sets member down and makes it a member of bond.
	Enslave(member, bond string) error
	SetUp(name string) error
}

// Bond is one bond to make.
type Bond struct {
	Name    string
	Mode    config.BondMode
	Miimon  time.Duration
	Members []string // interface names, the primary first
	SysRoot string   // "/sys"
	NL      Netlink
}

// CreateStep makes the bond and enslaves the members (bond-create); run
// it before the members' tuning, and UpStep after.
func (b *Bond) CreateStep() boot.Step {
	return boot.Step{Name: "bond-create", Apply: b.create, Verify: b.verifyMembers}
}

func (b *Bond) create(_ context.Context, d boot.Detail) error {
	d["name"], d["mode"], d["members"] = b.Name, string(b.Mode), strings.Join(b.Members, ",")
	if len(b.Members) == 0 {
		return errors.New("no members")
	}
	ms := int(b.Miimon / time.Millisecond)
	if err := b.NL.AddBond(b.Name, b.Mode, ms); err != nil {
		return fmt.Errorf("add %s mode %s: %w", b.Name, b.Mode, err)
	}
	var errs []error
	for _, m := range b.Members {
		if err := b.NL.Enslave(m, b.Name); err != nil {
			errs = append(errs, fmt.Errorf("enslave %s to %s: %w", m, b.Name, err))
		}
	}
	return errors.Join(errs...)
}

// verifyMembers reads the mode and the member list back from the bonding
// driver's sysfs files.
func (b *Bond) verifyMembers(context.Context, boot.Detail) error {
	st, err := Read(b.SysRoot, b.Name)
	if err != nil {
		return err
	}
	if st.Mode != string(b.Mode) {
		return fmt.Errorf("%s mode %q, want %s", b.Name, st.Mode, b.Mode)
	}
	var names []string
	for _, m := range st.Members {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, b.Members) {
		return fmt.Errorf("%s members %v, want %v", b.Name, names, b.Members)
	}
	return nil
}

// UpStep brings the bond up and reports every member's link state. It
// waits for every member to have link, up to 20 miimon periods and a
// second (the driver polls its members' carrier every miimon, so a link
// that has just come up shows a period later), so that the report says
// what the members are rather than how far the driver had polled; a
// member still down then is reported down. It fails when no member has
// link: the bond would carry nothing.
func (b *Bond) UpStep() boot.Step {
	return boot.Step{Name: "bond-up", Apply: func(_ context.Context, d boot.Detail) error {
		if err := b.NL.SetUp(b.Name); err != nil {
			return fmt.Errorf("link set %s up: %w", b.Name, err)
		}
		return nil
	}, Verify: func(ctx context.Context, d boot.Detail) error {
		deadline := time.Now().Add(20*b.Miimon + time.Second)
		for {
			st, err := Read(b.SysRoot, b.Name)
			if err != nil {
				return err
			}
			st.describe(d)
			late := time.Now().After(deadline) || ctx.Err() != nil
			switch {
			case st.Up() == len(st.Members):
				return nil
			case late && st.Up() > 0:
				return nil // carrying traffic; the members down are in the detail
			case late:
				return fmt.Errorf("%s: no member has link (%s)", b.Name, d["members"])
			}
			time.Sleep(b.Miimon)
		}
	}}
}

// State is a bond as the bonding driver shows it in sysfs.
type State struct {
	Mode    string // "active-backup" (the first word of bonding/mode)
	Active  string // bonding/active_slave ("" outside active-backup)
	Members []Member
}

// Member is one member's state.
type Member struct {
	Name string
	MII  string // bonding_slave/mii_status: "up", "down", ...
	// State is bonding_slave/state: "active" or "backup".
	State string
}

// Up counts the members with link.
func (s State) Up() int {
	n := 0
	for _, m := range s.Members {
		if m.MII == "up" {
			n++
		}
	}
	return n
}

func (s State) describe(d boot.Detail) {
	var ms []string
	for _, m := range s.Members {
		ms = append(ms, fmt.Sprintf("%s:%s:%s", m.Name, m.MII, m.State))
	}
	d["members"] = strings.Join(ms, ",")
	d["mode"] = s.Mode
	if s.Active != "" {
		d["active"] = s.Active
	}
}

// Read reads bond name's state from sysRoot/class/net.
func Read(sysRoot, name string) (State, error) {
	dir := filepath.Join(sysRoot, "class/net", name)
	mode, err := readTrim(filepath.Join(dir, "bonding/mode"))
	if err != nil {
		return State{}, fmt.Errorf("bond %s: %w", name, err)
	}
	mode, _, _ = strings.Cut(mode, " ")
	slaves, err := readTrim(filepath.Join(dir, "bonding/slaves"))
	if err != nil {
		return State{}, fmt.Errorf("bond %s: %w", name, err)
	}
	st := State{Mode: mode}
	st.Active, _ = readTrim(filepath.Join(dir, "bonding/active_slave"))
	for _, s := range strings.Fields(slaves) {
		m := Member{Name: s}
		sd := filepath.Join(sysRoot, "class/net", s, "bonding_slave")
		m.MII, _ = readTrim(filepath.Join(sd, "mii_status"))
		m.State, _ = readTrim(filepath.Join(sd, "state"))
		st.Members = append(st.Members, m)
	}
	return st, nil
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}

// Kernel is the running kernel's rtnetlink (github.com/vishvananda/netlink).
type Kernel struct{}

// AddBond implements Netlink.
func (Kernel) AddBond(name string, mode config.BondMode, miimonMS int) error {
	b := netlink.NewLinkBond(netlink.LinkAttrs{Name: name})
	b.Mode = netlink.StringToBondMode(string(mode))
	b.Miimon = miimonMS
	if mode == config.Bond8023ad {
		// Flows hashed on addresses and ports, so that the connections
		// of one client spread over the members; LACPDUs every second, so
		// that a member the switch drops is seen in 3 s, not 90.
		b.XmitHashPolicy = netlink.BOND_XMIT_HASH_POLICY_LAYER3_4
		b.LacpRate = netlink.BOND_LACP_RATE_FAST
	}
	if l, err := netlink.LinkByName(name); err == nil {
		// The mode can change while the bond is down and has no member,
		// as the driver's own bond0 is at this point.
		b.Index = l.Attrs().Index
		return netlink.LinkModify(b)
	}
	return netlink.LinkAdd(b)
}

// Enslave implements Netlink.
func (Kernel) Enslave(member, bond string) error {
	m, err := netlink.LinkByName(member)
	if err != nil {
		return err
	}
	b, err := netlink.LinkByName(bond)
	if err != nil {
		return err
	}
	if m.Attrs().MasterIndex == b.Attrs().Index {
		return nil
	}
	if err := netlink.LinkSetDown(m); err != nil {
		return fmt.Errorf("set %s down: %w", member, err)
	}
	return netlink.LinkSetMasterByIndex(m, b.Attrs().Index)
}

// SetUp implements Netlink.
func (Kernel) SetUp(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}
