package netconf6

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/netconf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// What router advertisements may leave installed on the interface. The
// kernel processes advertisements itself and bounds none of this: each
// on-link prefix becomes a route (10,000 prefixes made 10,002 routes in
// the issue; TestRAFlood's 302 make 303 here, and an on-link ::/0 too),
// each advertising address a default route; only autoconfigured
// addresses are bounded (max_addresses, 16). So once the step has taken
// its advertisement, the init stops the kernel taking more (accept_ra=0,
// as the DHCP leases are taken once), keeps at most these many of what
// the advertisements installed, checked, pinned without expiry (nothing
// refreshes them any more), and removes the rest.
const (
	// MaxRARouters is how many default routers are kept: EC2's subnet
	// has one.
	MaxRARouters = 2
	// MaxRAPrefixes is how many on-link prefix routes are kept: EC2
	// announces the subnet's /64.
	MaxRAPrefixes = 4
	// MaxRAAddresses is how many autoconfigured (SLAAC) addresses are
	// kept.
	MaxRAAddresses = 4
	// MinOnLinkBits is the shortest on-link prefix kept: a shorter one
	// (::/0 in the extreme) declares a good part of the internet to be on
	// the link, and its route outranks the default route.
	MinOnLinkBits = 16
	// minHopLimit is the lowest hop limit an advertisement may set
	// (accept_ra_min_hop_limit): one advertising 1 would keep every
	// packet of the appliance on the link.
	minHopLimit = "32"
)

// RAState is what router advertisements installed on a link, parsed by
// ParseRA: the routes and addresses kept, and those refused with the
// reason. Only ParseRA makes one, and TakeRA pins what it keeps and
// removes what it refuses.
type RAState struct {
	Routers   []netip.Addr   // gateways of the default routes kept
	Prefixes  []netip.Prefix // on-link prefixes kept
	Addresses []netip.Prefix // autoconfigured addresses kept
	// Refused says, one entry per reason, how many were removed and
	// the first of them.
	Refused []string

	keepRoutes, dropRoutes []netlink.Route
	keepAddrs, dropAddrs   []netlink.Addr
}

// ParseRA sorts the IPv6 routes (main table) and addresses of a link
// into what RAState keeps and refuses. Kernel routes of its own (the
// link-local /64, multicast, local and anycast routes) and routes with a
// gateway other than the default route are left alone; permanent addresses (DHCPv6, static)
// are not the advertisements' and are kept without counting. Prefix
// routes of kept addresses come first among the prefixes.
func ParseRA(routes []netlink.Route, addrs []netlink.Addr) RAState {
	var s RAState
	counts, first := map[string]int{}, map[string]string{}
	refuse := func(reason string, what any) {
		if counts[reason]++; counts[reason] == 1 {
			first[reason] = fmt.Sprint(what)
		}
	}
	own := s.parseAddrs(addrs, refuse)
	var prefixes []netlink.Route
	for _, r := range routes {
		// Only unicast routes of the main table: a kernel built without
		// IPV6_MULTIPLE_TABLES (the appliance's) keeps its local and
		// anycast routes for the link's own addresses there too.
		if r.Table != 0 && r.Table != unix.RT_TABLE_MAIN || r.Type != 0 && r.Type != unix.RTN_UNICAST {
			continue
		}
		dst := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		if r.Dst != nil {
			var ok bool
			if dst, ok = prefixOf(r.Dst); !ok {
				continue
			}
		}
		switch {
		case r.Gw != nil && dst.Bits() == 0:
			gw, _ := netip.AddrFromSlice(r.Gw)
			switch {
			case !gw.IsLinkLocalUnicast():
				s.dropRoutes = append(s.dropRoutes, r)
				refuse("default routes via a router that is not link-local", gw)
			case len(s.Routers) >= MaxRARouters:
				s.dropRoutes = append(s.dropRoutes, r)
				refuse(fmt.Sprintf("default routers beyond %d", MaxRARouters), gw)
			default:
				s.Routers = append(s.Routers, gw)
				s.keepRoutes = append(s.keepRoutes, r)
			}
		case r.Gw != nil || dst.Addr().IsMulticast() || dst == netip.MustParsePrefix("fe80::/64"):
			// Not an advertisement's: a route of the configuration, or
			// the kernel's own.
		case dst.Bits() < MinOnLinkBits:
			s.dropRoutes = append(s.dropRoutes, r)
			refuse(fmt.Sprintf("on-link prefixes shorter than /%d", MinOnLinkBits), dst)
		case notUnicast6(dst.Addr()) != "" && !dst.Addr().IsUnspecified() || dst.Addr().IsLinkLocalUnicast():
			s.dropRoutes = append(s.dropRoutes, r)
			refuse("on-link prefixes that are not unicast", dst)
		case own[dst]:
			s.Prefixes = append(s.Prefixes, dst)
			s.keepRoutes = append(s.keepRoutes, r)
		default:
			prefixes = append(prefixes, r)
		}
	}
	for _, r := range prefixes {
		if len(s.Prefixes) >= MaxRAPrefixes {
			s.dropRoutes = append(s.dropRoutes, r)
			refuse(fmt.Sprintf("on-link prefixes beyond %d", MaxRAPrefixes), r.Dst)
			continue
		}
		p, _ := prefixOf(r.Dst)
		s.Prefixes = append(s.Prefixes, p)
		s.keepRoutes = append(s.keepRoutes, r)
	}
	for reason, n := range counts {
		s.Refused = append(s.Refused, fmt.Sprintf("%d %s (first %s)", n, reason, first[reason]))
	}
	slices.Sort(s.Refused)
	return s
}

// parseAddrs keeps the first MaxRAAddresses autoconfigured addresses and
// returns the prefixes of the addresses kept, permanent ones included.
func (s *RAState) parseAddrs(addrs []netlink.Addr, refuse func(string, any)) map[netip.Prefix]bool {
	own := map[netip.Prefix]bool{}
	for _, a := range addrs {
		p, ok := prefixOf(a.IPNet)
		if !ok || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if a.Flags&unix.IFA_F_PERMANENT != 0 {
			own[p.Masked()] = true
			continue
		}
		if len(s.Addresses) >= MaxRAAddresses {
			s.dropAddrs = append(s.dropAddrs, a)
			refuse(fmt.Sprintf("autoconfigured addresses beyond %d", MaxRAAddresses), p)
			continue
		}
		s.Addresses = append(s.Addresses, p)
		s.keepAddrs = append(s.keepAddrs, a)
		own[p.Masked()] = true
	}
	return own
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if !ok || !a.Is6() || bits != 128 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}

// limitRA sets what the kernel takes from advertisements before the step
// waits for one: no hop limit below minHopLimit; and with a static address
// and gateway, nothing at all (accept_ra=0): the configuration is whole,
// and an advertisement could only add to it. Without IPv6 on the
// interface it does nothing.
func limitRA(o Options) error {
	conf := raConf(o)
	if _, err := os.Stat(conf); err != nil || o.Mode == Off {
		return nil
	}
	if err := setConf(conf, "accept_ra_min_hop_limit", minHopLimit); err != nil {
		return err
	}
	if o.Mode == Static && o.Static.Gateway.IsValid() {
		return setConf(conf, "accept_ra", "0")
	}
	return nil
}

// TakeRA freezes what router advertisements installed on ifname, once
// the step has what it needs: when the kernel recorded an advertisement,
// it stops processing them (accept_ra=0 in conf), then parses the link's
// routes and addresses (ParseRA), removes what is refused and pins what
// is kept without expiry. d gets what was kept and refused. frozen says
// whether there was an advertisement to freeze.
func TakeRA(ifname, conf string, d boot.Detail) (frozen bool, err error) {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return false, fmt.Errorf("link %s: %w", ifname, err)
	}
	f, err := raFlags(link.Attrs().Index)
	if err != nil || f&ifRARcvd == 0 {
		return false, err // no advertisement: nothing to freeze
	}
	// First: no advertisement may change the link between the reading
	// and the pinning.
	if err := setConf(conf, "accept_ra", "0"); err != nil {
		return false, err
	}
	s, err := readRA(link)
	if err != nil {
		return true, err
	}
	var errs []string
	for _, r := range s.dropRoutes {
		if err := netlink.RouteDel(&r); err != nil {
			errs = append(errs, fmt.Sprintf("remove route %v: %v", r.Dst, err))
		}
	}
	for _, a := range s.dropAddrs {
		if err := netlink.AddrDel(link, &a); err != nil {
			errs = append(errs, fmt.Sprintf("remove address %v: %v", a.IPNet, err))
		}
	}
	for _, r := range s.keepRoutes {
		if err := netlink.RouteReplace(&r); err != nil {
			errs = append(errs, fmt.Sprintf("pin route %v: %v", r.Dst, err))
		}
	}
	for _, a := range s.keepAddrs {
		pinned := &netlink.Addr{IPNet: a.IPNet, ValidLft: netconf.Forever, PreferedLft: netconf.Forever,
			Flags: a.Flags &^ (unix.IFA_F_TENTATIVE | unix.IFA_F_DEPRECATED | unix.IFA_F_PERMANENT)}
		if err := netlink.AddrReplace(link, pinned); err != nil {
			errs = append(errs, fmt.Sprintf("pin address %v: %v", a.IPNet, err))
		}
	}
	if len(s.keepAddrs) > 0 {
		d["valid_lft"] = "forever (pinned when the advertisements were frozen)"
	}
	d["ra_frozen"] = fmt.Sprintf("routers %v, prefixes %v, addresses %v kept", s.Routers, s.Prefixes, s.Addresses)
	if len(s.Refused) > 0 {
		d["ra_refused"] = strings.Join(s.Refused, "; ")
	}
	if len(errs) > 0 {
		return true, fmt.Errorf("freezing the router advertisements' configuration of %s: %s", ifname, strings.Join(errs[:min(len(errs), 3)], "; "))
	}
	return true, nil
}

// readRA parses the IPv6 routes and addresses of link.
func readRA(link netlink.Link) (RAState, error) {
	routes, err := netlink.RouteList(link, netlink.FAMILY_V6)
	if err != nil {
		return RAState{}, fmt.Errorf("list IPv6 routes of %s: %w", link.Attrs().Name, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return RAState{}, fmt.Errorf("list IPv6 addresses of %s: %w", link.Attrs().Name, err)
	}
	return ParseRA(routes, addrs), nil
}

// VerifyRA reads back what TakeRA left: advertisements no longer
// processed (accept_ra 0 in conf), and nothing on the link that ParseRA
// would refuse.
func VerifyRA(ifname, conf string) error {
	b, err := os.ReadFile(filepath.Join(conf, "accept_ra"))
	if err != nil {
		return fmt.Errorf("read accept_ra: %w", err)
	}
	if v := strings.TrimSpace(string(b)); v != "0" {
		return fmt.Errorf("%s: accept_ra is %s, want 0 (advertisements frozen)", ifname, v)
	}
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("link %s: %w", ifname, err)
	}
	s, err := readRA(link)
	if err != nil {
		return err
	}
	if len(s.Refused) > 0 {
		return fmt.Errorf("%s: beyond what advertisements may install: %s", ifname, strings.Join(s.Refused, "; "))
	}
	return nil
}

// raConf is the interface's IPv6 sysctl directory.
func raConf(o Options) string { return filepath.Join(o.ProcRoot, "sys/net/ipv6/conf", o.Interface) }
