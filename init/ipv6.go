package main

import (
	"log"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/netconf6"
)

// ipv6Steps configure IPv6 on the primary interface after IPv4 (package
// netconf6): net.ipv6 is independent of net.mode, so net.mode=off with
// net.ipv6=dhcp is an IPv6-only instance that sends no DHCPv4 at all.
func ipv6Steps(m *machine) []boot.Step {
	if m.link == nil {
		return []boot.Step{skipStep(netconf6.StepName, "no primary network interface")}
	}
	c := m.cfg.Net
	return []boot.Step{netconf6.Step(netconf6.Options{
		Interface: m.link.Name, Mode: netconf6.Mode(c.IPv6.Mode), RAWait: c.IPv6.RAWait,
		DHCPTimeout: c.DHCPTimeout, DHCPRetries: c.DHCPRetries,
		Static:   netconf6.Lease{Addr: c.IPv6.Address, Gateway: c.IPv6.Gateway},
		ProcRoot: m.procRoot, Log: log.New(m.con, "dhcpv6: ", 0),
	})}
}
