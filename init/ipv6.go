package main

import (
	"context"
	"log"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/imds"
	"github.com/hotpath-dev/hotpath/init/netconf6"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/timesync"
)

// ipv6Steps configure IPv6 on the interface the address goes on (the
// VLAN, the bond or the primary NIC: netName) after IPv4 (package
// netconf6): net.ipv6 is independent of net.mode, so net.mode=off with
// net.ipv6=dhcp is an IPv6-only instance that sends no DHCPv4 at all.
//
// What the workload needs is the IPv4 address when there is IPv4: then
// IPv6 goes on in the background (a background step: the workload and the
// management endpoint listen on every address, so IPv6's serves when it
// arrives), and net.ipv6=auto costs an IPv4-only subnet nothing at boot.
// With net.mode=off IPv6 is the address, and the boot waits for it up to
// the network deadline (net.deadline); past it DHCPv6 goes on in the
// background (ipv6RetryStep).
func ipv6Steps(m *machine) []boot.Step {
	if m.link == nil {
		return []boot.Step{skipStep(netconf6.StepName, "no primary network interface")}
	}
	o := ipv6Options(m)
	if m.cfg.Net.Mode != config.NetOff {
		o = backgroundIPv6(o)
		s := netconf6.Step(o)
		s.Background = true
		return []boot.Step{s}
	}
	return []boot.Step{boot.Before(m.networkDeadline(), netconf6.Step(o))}
}

// backgroundRAWait is the least the background IPv6 step waits for a
// router advertisement. net.ipv6_ra_wait (2 s) bounds what an IPv4-only
// subnet pays on the way to ready; in the background it pays nothing, and
// 2 s is too short for a router that only answers solicitations (QEMU's
// user network; EC2's router answers them too): the kernel solicits once
// its link-local address has passed duplicate address detection, which
// starts up to rtr_solicit_delay (1 s) after link-up and takes 1 s, so
// 1-2 s after link-up, and the step starts some 100 ms after link-up.
// Measured: on make run's network one boot in nine skipped IPv6 ("no
// router advertisement within 2s", TestBootCost's usernet boots). The
// wait is not ended 1 s after the kernel's solicitation as in the
// foreground (netconf6.Options.FullRAWait): that gave up once under make
// test's load, 2 s in. An IPv4-only subnet ends it 4 s after the step's
// start, in the background.
const backgroundRAWait = 4 * time.Second

// backgroundIPv6 is the IPv6 step's options when it runs in the
// background: DHCPv6 retried until a server answers, as the DHCPv4
// retry, and at least backgroundRAWait for an advertisement.
func backgroundIPv6(o netconf6.Options) netconf6.Options {
	o.DHCPRetries = 0
	o.RAWait = max(o.RAWait, backgroundRAWait)
	o.FullRAWait = true
	return o
}

func ipv6Options(m *machine) netconf6.Options {
	c := m.cfg.Net
	return netconf6.Options{
		Interface: m.netName(), Mode: netconf6.Mode(c.IPv6.Mode), RAWait: c.IPv6.RAWait,
		DHCPTimeout: c.DHCPTimeout, DHCPRetries: c.DHCPRetries, BackoffMax: c.DHCPBackoffMax,
		Static:   netconf6.Lease{Addr: c.IPv6.Address, Gateway: c.IPv6.Gateway},
		ProcRoot: m.procRoot, Log: log.New(m.con, "dhcpv6: ", 0),
		PacketSocketsElsewhere: m.dhcpRetrying.Load,
	}
}

// ipv6RetryStep is IPv6 taken in the background after the boot's step
// failed (net.mode=off past the network deadline, in a DHCPv6 or auto
// mode): the whole step again, DHCPv6 until a server answers. nil when
// there is nothing to retry.
func ipv6RetryStep(m *machine, results []report.Step) *boot.Step {
	mode := m.cfg.Net.IPv6.Mode
	if m.cfg.Net.Mode != config.NetOff || !failed(results, netconf6.StepName) ||
		mode != config.IPv6DHCP && mode != config.IPv6Auto && mode != config.IPv6SLAAC {
		return nil
	}
	o := ipv6Options(m)
	o.DHCPRetries = 0
	s := netconf6.Step(o)
	s.Name, s.Background = netconf6.StepName+"-retry", true
	return &s
}

// imdsBases are the metadata service's endpoints in the order the init
// tries them: IPv4 unless net.mode=off, then IPv6 unless net.ipv6=off.
func imdsBases(c config.Config) []string {
	return imds.Bases(c.Net.Mode != config.NetOff, c.Net.IPv6.Mode != config.IPv6Off)
}

// chooseTimeSync picks Amazon Time Sync's address by family as
// imdsBases does; on EC2 (the first query is waited for anyway) the first
// that answers, elsewhere the first listed.
func chooseTimeSync(m *machine, ec2 bool) string {
	var servers []string
	if m.cfg.Net.Mode != config.NetOff {
		servers = append(servers, config.AmazonTimeSync)
	}
	if m.cfg.Net.IPv6.Mode != config.IPv6Off {
		servers = append(servers, timesync.AmazonTimeSync6)
	}
	if len(servers) == 0 {
		return ""
	}
	if !ec2 {
		return servers[0]
	}
	ctx, cancel := context.WithTimeout(m.ctx, 3*time.Second)
	defer cancel()
	s, err := timesync.Choose(ctx, servers, time.Second)
	if err != nil {
		m.con.Logf("time-sync: %v; following %s", err, servers[0])
		return servers[0]
	}
	return s
}
