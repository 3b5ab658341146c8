package netconf6

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func ipnet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	if a, _, _ := net.ParseCIDR(s); a != nil && !a.Equal(n.IP) {
		n.IP = a // an address, not a prefix
	}
	return n
}

func TestParseRA(t *testing.T) {
	dflt := func(gw string) netlink.Route {
		return netlink.Route{Dst: ipnet("::/0"), Gw: net.ParseIP(gw), Table: unix.RT_TABLE_MAIN}
	}
	onlink := func(p string) netlink.Route { return netlink.Route{Dst: ipnet(p), Table: unix.RT_TABLE_MAIN} }
	routes := []netlink.Route{
		dflt("fe80::1"), dflt("fe80::2"), dflt("fe80::3"), dflt("fd00::1"),
		onlink("fe80::/64"), onlink("ff00::/8"),
		{Dst: ipnet("fd00:99::/64"), Gw: net.ParseIP("fe80::1"), Table: unix.RT_TABLE_MAIN}, // configured, not an RA's
		onlink("::/0"), onlink("2000::/3"), onlink("::ffff:0:0/96"),
		onlink("fd00:1::/64"), onlink("fd00:2::/64"), onlink("fd00:3::/64"), onlink("fd00:4::/64"), onlink("fd00:5::/64"),
		onlink("fd00:9::/64"), // the SLAAC address's: kept first
		// The kernel's local and anycast routes, in the main table
		// when it has one table (the appliance's kernel, seen in QEMU):
		// not the advertisements'.
		{Dst: ipnet("fe80::5/128"), Table: unix.RT_TABLE_MAIN, Type: unix.RTN_LOCAL},
		{Dst: ipnet("fd00:9::/128"), Table: unix.RT_TABLE_MAIN, Type: unix.RTN_ANYCAST},
		{Dst: ipnet("fd00:78::2/128"), Table: unix.RT_TABLE_MAIN, Type: unix.RTN_LOCAL},
	}
	addrs := []netlink.Addr{
		{IPNet: ipnet("fe80::5/64")},
		{IPNet: ipnet("fd00:78::2/128"), Flags: unix.IFA_F_PERMANENT},
		{IPNet: ipnet("fd00:9::5/64")},
		{IPNet: ipnet("fd00:a::5/64")}, {IPNet: ipnet("fd00:b::5/64")}, {IPNet: ipnet("fd00:c::5/64")}, {IPNet: ipnet("fd00:d::5/64")},
	}
	s := ParseRA(routes, addrs)
	if got := fmt.Sprint(s.Routers); got != "[fe80::1 fe80::2]" {
		t.Errorf("routers %s", got)
	}
	if got := fmt.Sprint(s.Prefixes); got != "[fd00:9::/64 fd00:1::/64 fd00:2::/64 fd00:3::/64]" {
		t.Errorf("prefixes %s", got)
	}
	if got := fmt.Sprint(s.Addresses); got != "[fd00:9::5/64 fd00:a::5/64 fd00:b::5/64 fd00:c::5/64]" {
		t.Errorf("addresses %s", got)
	}
	want := "1 autoconfigured addresses beyond 4 (first fd00:d::5/64); 1 default routers beyond 2 (first fe80::3); " +
		"1 default routes via a router that is not link-local (first fd00::1); 1 on-link prefixes that are not unicast (first ::ffff:0.0.0.0/96); " +
		"2 on-link prefixes beyond 4 (first fd00:4::/64); 2 on-link prefixes shorter than /16 (first ::/0)"
	if got := strings.Join(s.Refused, "; "); got != want {
		t.Errorf("refused %q\nwant    %q", got, want)
	}
	if len(s.dropRoutes) != 1+1+1+2+2 || len(s.dropAddrs) != 1 || len(s.keepRoutes) != 2+4 {
		t.Errorf("drop %d routes %d addresses, keep %d routes", len(s.dropRoutes), len(s.dropAddrs), len(s.keepRoutes))
	}
}

// raCounts reads what advertisements left on ifname in ns: default
// routes, on-link prefix routes (not the link-local /64 or multicast),
// and global addresses with a finite lifetime.
func raCounts(t *testing.T, ns *vm.Netns, ifname string) (routers, prefixes, addrs, finite int, all string) {
	t.Helper()
	nl, link := vm.LinkIn(t, ns.Name, ifname)
	defer nl.Close()
	routes, err := nl.RouteList(link, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range routes {
		switch {
		case r.Dst == nil || r.Dst.String() == "::/0" && r.Gw != nil:
			routers++
		case r.Dst.String() == "fe80::/64" || r.Dst.IP.IsMulticast():
		default:
			prefixes++
			if len(lines) < 20 {
				lines = append(lines, r.Dst.String())
			}
		}
	}
	as, err := nl.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.IP.IsGlobalUnicast() {
			addrs++
			if uint32(a.ValidLft) != 0xFFFFFFFF {
				finite++
			}
		}
	}
	return routers, prefixes, addrs, finite, strings.Join(lines, " ")
}

// TestRAFlood: a router announces 300 more autonomous prefixes besides
// the subnet's, an on-link ::/0 and a /8, every 200 ms. The step
// (net.ipv6=slaac) keeps at most MaxRAPrefixes prefix routes and
// MaxRAAddresses addresses, pinned forever, none of the wrong length;
// and for two seconds after, the advertisements still coming, nothing
// was added: the kernel no longer takes them.
func TestRAFlood(t *testing.T) {
	srv, cli := pair(t)
	more := []netip.Prefix{netip.MustParsePrefix("::/0"), netip.MustParsePrefix("fd00::/8")}
	for i := range 300 {
		more = append(more, netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x01, byte(i >> 8), byte(i)}), 64))
	}
	ra, err := srv.StartRA(vm.RAConfig{Iface: "v6s", Prefix: netip.MustParsePrefix("fd00:78::/64"), Autonomous: true,
		Every: 200 * time.Millisecond, More: more})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	res, _ := runChild(t, cli, "slaac", 5*time.Second)
	t.Logf("step %s %s %v", res.Step.Status, res.Step.Error, res.Step.Detail)
	if res.Step.Status != report.Applied {
		t.Fatalf("step %+v (advertiser errors %v)", res.Step, ra.Errors())
	}
	check := func(when string) int {
		routers, prefixes, addrs, finite, list := raCounts(t, cli, "v6c")
		if routers > 1 || prefixes > MaxRAPrefixes || prefixes == 0 || addrs > MaxRAAddresses || addrs == 0 || finite != 0 {
			t.Errorf("%s: %d default routes, %d prefix routes (%s), %d addresses (%d with a finite lifetime); want at most 1 (the flood's advertisements with router lifetime 0 withdraw it), 1..%d, 1..%d, 0",
				when, routers, prefixes, list, addrs, finite, MaxRAPrefixes, MaxRAAddresses)
		}
		if strings.Contains(" "+list, " ::/0") || strings.Contains(list, "fd00::/8") {
			t.Errorf("%s: a prefix of the wrong length is on-link: %s", when, list)
		}
		return prefixes
	}
	n := check("after the step")
	// The advertisements go on (the whole flood every 200 ms): for two
	// seconds, nothing comes back.
	sent := ra.Sent()
	for i := range 10 {
		time.Sleep(200 * time.Millisecond)
		if check(fmt.Sprintf("%d ms later", 200*(i+1))) != n {
			t.Fatalf("prefix routes changed after the step")
		}
	}
	if ra.Sent() == sent {
		t.Fatal("the advertiser stopped")
	}
	if d := res.Step.Detail["ra_refused"]; !strings.Contains(d, "on-link prefixes beyond 4") {
		t.Errorf("ra_refused %q", d)
	}
}

// TestRAWrongLength: an advertisement's on-link ::/0 and /8, which the
// kernel installs as routes that outrank the default route, are removed
// by the step; the subnet's /64 stays.
func TestRAWrongLength(t *testing.T) {
	srv, cli := pair(t)
	ra, err := srv.StartRA(vm.RAConfig{Iface: "v6s", Prefix: netip.MustParsePrefix("fd00:78::/64"), Autonomous: true,
		Every: 200 * time.Millisecond, More: []netip.Prefix{netip.MustParsePrefix("::/0"), netip.MustParsePrefix("fd00::/8")}})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	res, _ := runChild(t, cli, "slaac", 5*time.Second)
	if res.Step.Status != report.Applied {
		t.Fatalf("step %+v (advertiser errors %v)", res.Step, ra.Errors())
	}
	_, _, _, _, list := raCounts(t, cli, "v6c")
	if list != "fd00:78::/64" {
		t.Errorf("on-link prefixes after the step: %q, want only fd00:78::/64", list)
	}
	if d := res.Step.Detail["ra_refused"]; d != "2 on-link prefixes shorter than /16 (first ::/0)" && d != "2 on-link prefixes shorter than /16 (first fd00::/8)" {
		t.Errorf("ra_refused %q", d)
	}
}

// TestStaticIgnoresRA: with a static address and gateway, advertisements
// (here the subnet's and ten more autonomous prefixes, every 200 ms) add
// nothing: no route, no address.
func TestStaticIgnoresRA(t *testing.T) {
	srv, cli := pair(t)
	var more []netip.Prefix
	for i := range 10 {
		more = append(more, netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x02, 0, byte(i)}), 64))
	}
	ra, err := srv.StartRA(vm.RAConfig{Iface: "v6s", Prefix: netip.MustParsePrefix("fd00:78::/64"), Autonomous: true,
		Every: 200 * time.Millisecond, More: more})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	res, _ := runChild(t, cli, "static", 0)
	if res.Step.Status != report.Applied {
		t.Fatalf("step %+v", res.Step)
	}
	// The advertiser starts once the link has carrier and its
	// link-local address: wait for ten rounds after the step.
	for sent, deadline := ra.Sent(), time.Now().Add(10*time.Second); ra.Sent() < sent+10*(1+len(more)/32); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the advertiser sent %d advertisements (errors %v)", ra.Sent(), ra.Errors())
		}
	}
	routers, prefixes, addrs, _, list := raCounts(t, cli, "v6c")
	// The static gateway's default route, the static /64's prefix
	// route, the static address.
	if routers != 1 || prefixes != 1 || list != "fd00:78::/64" || addrs != 1 {
		t.Errorf("%d default routes, %d prefix routes (%s), %d global addresses; want 1, 1 (fd00:78::/64), 1", routers, prefixes, list, addrs)
	}
}
