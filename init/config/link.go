package config

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Link is how the NICs become the interface the address goes on (the
// nic.match, bond.* and vlan.* keys): which NICs are used, bonded or not,
// tagged or not. Zero values are one NIC, no bond, no VLAN.
type Link struct {
	// Match selects the NICs to use (nic.match), in order; empty: the
	// first NIC (net.interface). The first NIC matched is the primary.
	Match []Match
	Bond  BondMode // bond.mode
	// BondMiimon is bond.miimon: how often the bond reads its members'
	// carrier (the failover delay of active-backup is up to this).
	BondMiimon time.Duration
	VLAN       int // vlan.id: 802.1Q tag of the interface on top; 0 none
}

// Match is one nic.match selector: a MAC address, a PCI address or a
// driver name, told apart by their form.
type Match struct {
	MAC    net.HardwareAddr // "52:54:00:12:34:56"
	PCI    string           // "0000:3b:00.0"
	Driver string           // "igb", "mlx5_core"
}

// String is the selector as written.
func (m Match) String() string {
	switch {
	case m.MAC != nil:
		return m.MAC.String()
	case m.PCI != "":
		return m.PCI
	}
	return m.Driver
}

// BondMode is bond.mode.
type BondMode string

// The values of bond.mode.
const (
	BondNone         BondMode = "off"           // no bond
	BondActiveBackup BondMode = "active-backup" // one member carries traffic, the next takes over on carrier loss
	Bond8023ad       BondMode = "802.3ad"       // LACP with the switch; flows hashed over every member
)

var (
	pciForm    = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	driverForm = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

// ParseMatch parses a nic.match value: selectors separated by commas.
func ParseMatch(v string) ([]Match, error) {
	var out []Match
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		if f == "" {
			continue
		}
		if mac, err := net.ParseMAC(f); err == nil && len(mac) == 6 {
			out = append(out, Match{MAC: mac})
			continue
		}
		switch {
		case pciForm.MatchString(f):
			out = append(out, Match{PCI: f})
		case driverForm.MatchString(f):
			out = append(out, Match{Driver: f})
		default:
			return nil, fmt.Errorf("%q is not a MAC address, a PCI address (0000:3b:00.0) or a driver name", f)
		}
	}
	return out, nil
}

var linkKeys = []Key{
	{"nic.match", "", "NICs to use, comma-separated: MAC address, PCI address (0000:3b:00.0) or driver name (igb); " +
		"the first matched is the primary, the others are bond members; NICs not matched are left down. " +
		"Empty: the first NIC (net.interface)",
		func(c *Config, v string) error {
			m, err := ParseMatch(v)
			if err != nil {
				return err
			}
			c.Link.Match = m
			return nil
		}, func(c *Config) string {
			s := make([]string, len(c.Link.Match))
			for i, m := range c.Link.Match {
				s[i] = m.String()
			}
			return strings.Join(s, ",")
		}},
	{"bond.mode", "off", "off, active-backup or 802.3ad: bond0 over the NICs nic.match selects (every physical NIC without it)",
		enum(func(c *Config) *BondMode { return &c.Link.Bond }, BondNone, BondActiveBackup, Bond8023ad),
		func(c *Config) string { return string(c.Link.Bond) }},
	{"bond.miimon", "100ms", "how often the bond checks its members' carrier (milliseconds resolution)",
		durSetter(func(c *Config) *time.Duration { return &c.Link.BondMiimon }),
		func(c *Config) string { return c.Link.BondMiimon.String() }},
	{"vlan.id", "0", "802.1Q VLAN on top of the NIC or bond (the address goes on it); 0 = untagged",
		intSetter(func(c *Config) *int { return &c.Link.VLAN }, 0, 4094),
		func(c *Config) string { return strconv.Itoa(c.Link.VLAN) }},
}
