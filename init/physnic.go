package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hotpath-dev/hotpath/init/bond"
	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/vlan"
	"github.com/vishvananda/netlink"
)

// The steps of a dedicated server's network: the NICs nic.match selects
// (the others left down), a bond over them, the NIC tuning on every
// member, and a VLAN on top. Without nic.match, bond.mode and vlan.id the
// boot is the one-NIC boot it always was, with these steps skipped.

// discoverNICs is nic-discover's choice of the primary NIC: net.interface
// or the first NIC, or with nic.match (or a bond) the first NIC selected;
// the selected NICs become m.members and the others are set down, each
// named in the step's detail.
func (m *machine) discoverNICs(d boot.Detail) (nic.Link, error) {
	lc := m.cfg.Link
	if len(lc.Match) == 0 && lc.Bond == config.BondNone {
		l, err := nic.Discover(m.sysRoot, m.cfg.Net.Interface)
		if err == nil {
			m.members = []nic.Link{l}
		}
		return l, err
	}
	sel, others, err := nic.Select(m.sysRoot, lc.Match)
	var down []string
	for _, o := range others {
		if l, lerr := netlink.LinkByName(o.Name); lerr == nil && netlink.LinkSetDown(l) == nil {
			down = append(down, o.Name)
		} else {
			down = append(down, o.Name+" (could not be set down)")
		}
	}
	if len(down) > 0 {
		d["left_down"] = strings.Join(down, ",")
	}
	if err != nil {
		return nic.Link{}, err
	}
	if lc.Bond == config.BondNone && len(sel) > 1 {
		// Without a bond only the primary is used: the others go down too.
		for _, o := range sel[1:] {
			if l, lerr := netlink.LinkByName(o.Name); lerr == nil {
				netlink.LinkSetDown(l)
			}
			d["left_down"] = strings.TrimPrefix(d["left_down"]+","+o.Name+" (matched, no bond.mode)", ",")
		}
		sel = sel[:1]
	}
	m.members = sel
	var names []string
	for _, s := range sel {
		names = append(names, fmt.Sprintf("%s(%s %s)", s.Name, s.Driver, s.PCI))
	}
	d["matched"] = strings.Join(names, ",")
	return sel[0], nil
}

// bondCreateSteps make bond0 over the members, enslaved while still down
// (before nicTuneSteps brings them up).
func bondCreateSteps(m *machine) []boot.Step {
	switch {
	case m.cfg.Link.Bond == config.BondNone:
		return []boot.Step{skipStep("bond-create", "bond.mode=off")}
	case len(m.members) == 0:
		return []boot.Step{skipStep("bond-create", "no NIC selected")}
	}
	var names []string
	for _, l := range m.members {
		names = append(names, l.Name)
	}
	m.bond = &bond.Bond{Name: bond.Name, Mode: m.cfg.Link.Bond, Miimon: m.cfg.Link.BondMiimon,
		Members: names, SysRoot: m.sysRoot, NL: bond.Kernel{}}
	return []boot.Step{m.bond.CreateStep()}
}

// memberTuneSteps run the NIC steps for every member but the primary
// (whose steps nicTuneSteps ran), each step named after its member
// ("nic-irq-affinity@eth1"): IRQs, XPS and moderation are per device.
// The workload's CPUs stay the primary's decision.
func memberTuneSteps(m *machine) []boot.Step {
	var out []boot.Step
	if m.tuner == nil || len(m.members) < 2 {
		return append(out, firmwareSteps(m)...)
	}
	for _, l := range m.members[1:] {
		t := &nic.Tuner{SysRoot: m.sysRoot, ProcRoot: m.procRoot, Link: l, CPUs: m.cpus, NrCPUs: m.nrCPUs,
			Ethtool: m.tuner.Ethtool, Netlink: m.tuner.Netlink, Opt: m.cfg.NIC, DefaultQdisc: m.tuner.DefaultQdisc}
		for _, s := range t.Steps() {
			s.Name += "@" + l.Name
			out = append(out, s)
		}
	}
	return append(out, firmwareSteps(m)...)
}

// upperSteps bring the bond up (its members' link state in the report)
// and put the VLAN on top; the interface the address goes on is the last
// of NIC, bond and VLAN.
func upperSteps(m *machine) []boot.Step {
	if m.link == nil {
		return nil
	}
	var out []boot.Step
	parent := m.link.Name
	if m.bond != nil {
		out = append(out, m.bond.UpStep())
		parent = m.bond.Name
	} else {
		out = append(out, skipStep("bond-up", "no bond"))
	}
	m.netIf = parent
	if m.cfg.Link.VLAN == 0 {
		return append(out, skipStep("vlan", "vlan.id=0"))
	}
	v := vlan.VLAN{Parent: parent, ID: m.cfg.Link.VLAN, NL: vlan.Kernel{}}
	m.netIf = v.Name()
	return append(out, v.Step())
}

// netName is the interface the address goes on: the VLAN, the bond, or
// the primary NIC.
func (m *machine) netName() string {
	if m.netIf != "" {
		return m.netIf
	}
	return m.link.Name
}

// icePackage is where ice looks for its DDP package (ICE_DDP_PKG_FILE,
// drivers/net/ethernet/intel/ice/ice.h): image build -firmware DIR puts
// it there.
const icePackage = "intel/ice/ddp/ice.pkg"

// firmwareSteps report, for each ice member, whether its DDP package was
// there for the driver: without it ice runs in safe mode (one queue, no
// RSS, no VLAN offloads: ice_init_ddp_config in ice_main.c), which the
// operator must be told plainly rather than find as a slow server.
func firmwareSteps(m *machine) []boot.Step {
	var ice []string
	for _, l := range m.members {
		if l.Driver == "ice" {
			ice = append(ice, l.Name)
		}
	}
	if len(ice) == 0 {
		return []boot.Step{skipStep("nic-firmware", "no NIC needs firmware from the image")}
	}
	return []boot.Step{{Name: "nic-firmware", Apply: func(_ context.Context, d boot.Detail) error {
		p := filepath.Join(firmwareRoot, icePackage)
		d["ice"] = strings.Join(ice, ",")
		if _, err := os.Stat(p); err != nil {
			return errors.New("ice is in SAFE MODE (one queue, no RSS): no DDP package " + p +
				" in the image (hotpath-image build -firmware DIR with " + icePackage + ")")
		}
		d["package"] = p
		return nil
	}}}
}

// firmwareRoot is where the kernel's firmware loader looks first.
var firmwareRoot = "/lib/firmware"
