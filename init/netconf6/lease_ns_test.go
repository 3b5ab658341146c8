package netconf6

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ifState6 is what an IPv6 lease may change on an interface, read back
// with netlink: its addresses other than the link-local one (with their
// lifetimes) and its IPv6 routes in every table (without the expiry an
// advertisement refreshes). ready says that the kernel has taken an
// advertisement's default route and the link-local address has passed
// duplicate address detection (its local route is there): the state a
// step finds.
func ifState6(t *testing.T, ns *vm.Netns, ifname string) (state string, ready bool) {
	t.Helper()
	nl, link := vm.LinkIn(t, ns.Name, ifname)
	defer nl.Close()
	var lines []string
	addrs, err := nl.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	ll := false
	for _, a := range addrs {
		ll = ll || a.IP.IsLinkLocalUnicast() && a.Flags&unix.IFA_F_TENTATIVE == 0
		if !a.IP.IsLinkLocalUnicast() {
			lines = append(lines, fmt.Sprintf("addr %s valid %d preferred %d", a.IPNet, a.ValidLft, a.PreferedLft))
		}
	}
	routes, err := nl.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, LinkIndex: link.Attrs().Index},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	if err != nil {
		t.Fatal(err)
	}
	ra := false
	for _, r := range routes {
		ra = ra || r.Protocol == unix.RTPROT_RA && r.Dst == nil || r.Protocol == unix.RTPROT_RA && r.Dst.String() == "::/0"
		lines = append(lines, fmt.Sprintf("route %v via %v table %d proto %v", r.Dst, r.Gw, r.Table, r.Protocol))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), ra && ll
}

// TestRefusedReplyLeavesInterface runs the IPv6 step (net.ipv6=dhcp)
// against tests/vm's router advertiser and DHCPv6 server, which answers
// with one hostile IA_NA per case. The state is read once the kernel has
// taken the advertisement's default route, and again after the step: a
// refused reply fails the step with its reason and changes nothing. The
// good case must change it (the comparison can see a change).
func TestRefusedReplyLeavesInterface(t *testing.T) {
	onlyReply := func(f func(*dhcpv6.Message)) func(*dhcpv6.Message) {
		return func(m *dhcpv6.Message) {
			if m.MessageType == dhcpv6.MessageTypeReply {
				f(m)
			}
		}
	}
	foreignIAID := func(m *dhcpv6.Message) { m.Options.OneIANA().IaId = [4]byte{1, 2, 3, 4} }
	for _, c := range []struct {
		name  string
		addr  string
		edit  func(*dhcpv6.Message)
		wrong string
	}{
		{"good", "fd00:78::2", nil, ""},
		{"::127.0.0.1", "::127.0.0.1", nil, "in ::/8"},
		{"ipv4-mapped", "::ffff:10.0.0.1", nil, "IPv4-mapped"},
		{"loopback", "::1", nil, "loopback"},
		{"multicast", "ff02::1", nil, "multicast"},
		{"link-local", "fe80::99", nil, "link-local"},
		{"IAID not ours in the advertise", "fd00:78::2", foreignIAID, "ADVERTISE IA_NA with IAID 01020304, not ours"},
		{"IAID not ours in the reply", "fd00:78::2", onlyReply(foreignIAID), "REPLY IA_NA with IAID 01020304, not ours"},
		{"DNS loopback", "fd00:78::2", onlyReply(func(m *dhcpv6.Message) { m.UpdateOption(dhcpv6.OptDNS(net.IPv6loopback)) }), "DNS server ::1 is loopback"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := pair(t)
			ra, err := srv.StartRA(vm.RAConfig{Iface: "v6s", Managed: true, Prefix: netip.MustParsePrefix("fd00:78::/64"), Every: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer ra.Close()
			d6, err := srv.StartDHCP6(vm.DHCP6Config{Iface: "v6s", ClientIP: netip.MustParseAddr(c.addr), Edit: c.edit})
			if err != nil {
				t.Fatal(err)
			}
			defer d6.Close()
			if out, err := cli.Command(t.Context(), "ip", "link", "set", "v6c", "up").CombinedOutput(); err != nil {
				t.Fatalf("link up: %v: %s", err, out)
			}
			var before string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var got bool
				if before, got = ifState6(t, cli, "v6c"); got {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no default route from the advertisements within 10 s (advertiser errors %v):\n%s", ra.Errors(), before)
				}
			}
			res, _ := runChild(t, cli, "dhcp", 5*time.Second)
			after, routed := ifState6(t, cli, "v6c")
			t.Logf("step %s: %s", res.Step.Status, res.Step.Error)
			if len(d6.Log()) == 0 {
				t.Fatalf("the DHCPv6 server heard nothing (errors %v): the case tests nothing", d6.Errors())
			}
			if c.wrong == "" {
				if res.Step.Status != report.Applied || before == after || !routed {
					t.Fatalf("good reply: step %+v; before:\n%s\nafter (want the advertisement's default route kept):\n%s", res.Step, before, after)
				}
				if !strings.HasPrefix(res.Step.Detail["ra_frozen"], "routers [fe80::") {
					t.Errorf("ra_frozen %q, want the router kept", res.Step.Detail["ra_frozen"])
				}
				return
			}
			if res.Step.Status != report.Failed || !strings.Contains(res.Step.Error, c.wrong) {
				t.Errorf("step %s %q, want failed with %q", res.Step.Status, res.Step.Error, c.wrong)
			}
			if before != after {
				t.Errorf("the interface changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestInstallRollsBack: a static lease whose default route the kernel
// refuses (its gateway is an address of the host itself) after the
// address went on: Install fails and takes the address off again.
func TestInstallRollsBack(t *testing.T) {
	_, cli := pair(t)
	if out, err := cli.Command(t.Context(), "ip", "-6", "addr", "add", "fd00:78::7/128", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	before, _ := ifState6(t, cli, "v6c")
	var ierr error
	if err := cli.Do(func() error {
		ierr = Install("v6c", Lease{Addr: netip.MustParsePrefix("fd00:78::9/64"), Gateway: netip.MustParseAddr("fd00:78::7")})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after, _ := ifState6(t, cli, "v6c")
	if ierr == nil || !strings.Contains(ierr.Error(), "rolled back") {
		t.Errorf("Install: %v, want the route refused and rolled back", ierr)
	}
	// The link came up (and with it its multicast and link-local
	// routes): compare the addresses and the routes of the lease.
	keep := func(s string) string {
		var l []string
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, "fd00:78") || strings.Contains(line, "route ::/0") || strings.Contains(line, "route <nil>") {
				l = append(l, line)
			}
		}
		return strings.Join(l, "\n")
	}
	if keep(before) != keep(after) {
		t.Errorf("the interface changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
