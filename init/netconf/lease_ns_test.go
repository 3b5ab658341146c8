package netconf

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ifState is what a lease may change on an interface, as netlink reads
// it back: the MTU, the IPv4 addresses with their lifetimes, and the
// IPv4 routes of every table through it.
func ifState(t *testing.T, ns, ifname string) string {
	t.Helper()
	nl, link := vm.LinkIn(t, ns, ifname)
	defer nl.Close()
	lines := []string{fmt.Sprintf("mtu %d", link.Attrs().MTU)}
	addrs, err := nl.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		lines = append(lines, fmt.Sprintf("addr %s valid %d preferred %d", a.IPNet, a.ValidLft, a.PreferedLft))
	}
	routes, err := nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, LinkIndex: link.Attrs().Index},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		lines = append(lines, fmt.Sprintf("route %v via %v scope %v table %d proto %v", r.Dst, r.Gw, r.Scope, r.Table, r.Protocol))
	}
	slices.Sort(lines[1:])
	return strings.Join(lines, "\n")
}

// TestRefusedLeaseLeavesInterface runs the DHCP step against tests/vm's
// DHCP server handing out one hostile lease per case, over a veth pair
// between two namespaces. The client already holds 10.99.0.5/24 and a
// default route via 10.99.0.1. A refused lease (and one whose routes the
// kernel refuses after the address went on) must fail the step and leave
// the interface exactly as it was: MTU, addresses, routes, and no
// resolv.conf. The first case is a good lease, which must change it:
// the comparison can see a change.
func TestRefusedLeaseLeavesInterface(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	ip := net.ParseIP
	mask24 := net.CIDRMask(24, 32)
	rt := func(dst, via string) *dhcpv4.Route { r := route(dst, via); return &r }
	for _, c := range []struct {
		name  string
		cfg   vm.DHCPConfig
		wrong string // "" the lease is taken
	}{
		{"good lease", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: mask24, Router: ip("10.77.0.1"), MTU: 1400,
			Extra: []dhcpv4.Option{dhcpv4.OptDNS(ip("10.77.0.1")), dhcpv4.OptDomainName("example.internal")}}, ""},
		{"subnet broadcast", vm.DHCPConfig{ClientIP: ip("10.77.0.255"), Mask: mask24, Router: ip("10.77.0.1")}, "broadcast address of 10.77.0.0/24"},
		{"loopback", vm.DHCPConfig{ClientIP: ip("127.0.0.9"), Mask: net.CIDRMask(8, 32)}, "loopback"},
		{"multicast", vm.DHCPConfig{ClientIP: ip("224.0.0.9"), Mask: mask24}, "multicast"},
		{"mask /0", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: net.CIDRMask(0, 32), Router: ip("10.77.0.1")}, "prefix length 0"},
		{"non-contiguous mask", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: net.IPv4Mask(255, 0, 255, 0)}, "not a contiguous"},
		{"router 255.255.255.255", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: mask24, Router: net.IPv4bcast}, "limited broadcast"},
		{"router off-subnet", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: mask24, Router: ip("192.0.2.1")}, "outside the leased subnet"},
		{"mtu 68", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: mask24, Router: ip("10.77.0.1"), MTU: 68}, "mtu 68"},
		{"option 15 newline", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: mask24, Router: ip("10.77.0.1"),
			Extra: []dhcpv4.Option{dhcpv4.OptDNS(ip("10.77.0.1")), dhcpv4.OptDomainName("evil.example\nnameserver 6.6.6.6")}}, "option 15"},
		{"nameserver broadcast", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: mask24, Router: ip("10.77.0.1"),
			Extra: []dhcpv4.Option{dhcpv4.OptDNS(net.IPv4bcast)}}, "nameserver 255.255.255.255"},
		// The kernel refuses the second classless route (its router is
		// on no link) after the MTU, the address and the default route
		// (replacing the client's own) went in: all of it is undone.
		{"route the kernel refuses", vm.DHCPConfig{ClientIP: ip("10.77.0.42"), Mask: mask24, MTU: 1400,
			Extra: []dhcpv4.Option{dhcpv4.OptClasslessStaticRoute(rt("0.0.0.0/0", "10.77.0.1"), rt("10.9.0.0/16", "192.0.2.1"))}}, "rolled back"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := vm.NewNetns(t), vm.NewNetns(t)
			if err := srv.AddVeth("ls", "10.77.0.1/24", cli, "lc", "10.99.0.5/24"); err != nil {
				t.Fatal(err)
			}
			run(t, "ip", "-n", cli.Name, "route", "add", "default", "via", "10.99.0.1", "dev", "lc")
			c.cfg.Iface, c.cfg.ServerIP = "ls", ip("10.77.0.1")
			d, err := srv.StartDHCP(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			resolv := t.TempDir() + "/resolv.conf"
			before := ifState(t, cli.Name, "lc")
			res, _ := runChild(t, cli.Name, "dhcp", "lc", "HOTPATH_NETCONF_RESOLV="+resolv)
			after := ifState(t, cli.Name, "lc")
			if len(d.Leases()) == 0 {
				t.Fatalf("the server acknowledged nothing (errors %v): the case tests nothing", d.Errors())
			}
			_, statErr := os.Stat(resolv)
			if c.wrong == "" {
				if res.Step.Status != report.Applied || before == after || statErr != nil {
					t.Fatalf("good lease: step %+v, resolv.conf %v; interface before:\n%s\nafter:\n%s", res.Step, statErr, before, after)
				}
				return
			}
			t.Logf("step %s: %s", res.Step.Status, res.Step.Error)
			if res.Step.Status != report.Failed || !strings.Contains(res.Step.Error, c.wrong) {
				t.Errorf("step %s %q, want failed with %q", res.Step.Status, res.Step.Error, c.wrong)
			}
			if strings.ContainsAny(res.Step.Error, "\n\r") {
				t.Errorf("the step's error carries a line break: %q", res.Step.Error)
			}
			if before != after {
				t.Errorf("the interface changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if !os.IsNotExist(statErr) {
				b, _ := os.ReadFile(resolv)
				t.Errorf("resolv.conf written: %q", b)
			}
		})
	}
}
