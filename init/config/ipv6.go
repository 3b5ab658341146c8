package config

import (
	"fmt"
	"net/netip"
	"time"
)

// IPv6 is the primary interface's IPv6 addressing (the net.ipv6* keys), as
// package netconf6 uses it. net.mode stays the IPv4 side: an IPv6-only
// subnet is net.mode=off with net.ipv6=dhcp (or auto), and then no DHCPv4
// DISCOVER is ever sent.
type IPv6 struct {
	Mode    IPv6Mode      // net.ipv6
	Address netip.Prefix  // net.ipv6_address (static)
	Gateway netip.Addr    // net.ipv6_gateway (static; "" takes the router advertisement's)
	RAWait  time.Duration // net.ipv6_ra_wait: how long to wait for a router advertisement
}

// IPv6Mode is net.ipv6: how the primary interface gets its IPv6 address.
type IPv6Mode string

// The values of net.ipv6.
const (
	// IPv6Auto follows the router advertisement: DHCPv6 when it carries
	// the managed flag (EC2), SLAAC when it carries an autonomous prefix,
	// nothing (skipped, said in the report) when none arrives within
	// net.ipv6_ra_wait.
	IPv6Auto   IPv6Mode = "auto"
	IPv6DHCP   IPv6Mode = "dhcp"   // DHCPv6 IA_NA, whatever the advertisement's flags
	IPv6SLAAC  IPv6Mode = "slaac"  // the kernel's stateless autoconfiguration only
	IPv6Static IPv6Mode = "static" // net.ipv6_address and net.ipv6_gateway
	IPv6Off    IPv6Mode = "off"    // no IPv6 address beyond the link-local one
)

// ipv6Keys configure the IPv6 address (package netconf6).
var ipv6Keys = []Key{
	{"net.ipv6", "auto", "auto (follow the router advertisement: DHCPv6 if managed, else SLAAC), dhcp, slaac, static or off",
		enum(func(c *Config) *IPv6Mode { return &c.Net.IPv6.Mode }, IPv6Auto, IPv6DHCP, IPv6SLAAC, IPv6Static, IPv6Off),
		func(c *Config) string { return string(c.Net.IPv6.Mode) }},
	{"net.ipv6_address", "", "net.ipv6=static: address in CIDR form, e.g. 2001:db8::10/64",
		func(c *Config, v string) error {
			if v == "" {
				c.Net.IPv6.Address = netip.Prefix{}
				return nil
			}
			p, err := netip.ParsePrefix(v)
			if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				return fmt.Errorf("not an IPv6 CIDR address")
			}
			c.Net.IPv6.Address = p
			return nil
		}, func(c *Config) string {
			if !c.Net.IPv6.Address.IsValid() {
				return ""
			}
			return c.Net.IPv6.Address.String()
		}},
	{"net.ipv6_gateway", "", "net.ipv6=static: default gateway, often the router's link-local fe80::1 (optional)",
		func(c *Config, v string) error {
			if v == "" {
				c.Net.IPv6.Gateway = netip.Addr{}
				return nil
			}
			a, err := netip.ParseAddr(v)
			if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
				return fmt.Errorf("not an IPv6 address")
			}
			c.Net.IPv6.Gateway = a
			return nil
		}, func(c *Config) string {
			if !c.Net.IPv6.Gateway.IsValid() {
				return ""
			}
			return c.Net.IPv6.Gateway.String()
		}},
	{"net.ipv6_ra_wait", "2s", "longest wait for a router advertisement (auto, dhcp, slaac) when IPv6 is the boot's address (net.mode=off): bounds what its boot pays; with IPv4 on, IPv6 waits in the background, at least 4s, all of it (in the foreground the wait ends 1s after the kernel's router solicitation)",
		durSetter(func(c *Config) *time.Duration { return &c.Net.IPv6.RAWait }),
		func(c *Config) string { return c.Net.IPv6.RAWait.String() }},
}

// validateIPv6 checks the net.ipv6* keys against each other.
func (c *Config) validateIPv6() error {
	if c.Net.IPv6.Mode == IPv6Static && !c.Net.IPv6.Address.IsValid() {
		return fmt.Errorf("config: net.ipv6=static needs net.ipv6_address")
	}
	return nil
}
