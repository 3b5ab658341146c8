package netconf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/u-root/u-root/pkg/dhclient"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fromPacket parses a DHCP acknowledgement into a Checked lease: a lease
// CheckLease refuses is an error naming the server, and nothing of it is
// installed.
func fromPacket(p *dhclient.Packet4) (Lease, error) {
	msg, _ := p.Message()
	server := "an unidentified server"
	if s := msg.ServerIdentifier(); s != nil {
		server = s.String()
	}
	l, err := parseAck(msg)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp: lease from %s: %w", server, err)
	}
	if s := msg.ServerIdentifier(); s != nil {
		l.Server = s.String()
	}
	c, err := CheckLease(l)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp: lease from %s: %w", server, err)
	}
	return c.Lease(), nil
}

// parseAck takes the lease out of a DHCP message: what dhclient's Packet4
// gathers, and the mask as sent, which a non-contiguous value must not
// turn into a /0.
func parseAck(msg *dhcpv4.DHCPv4) (Lease, error) {
	addr, ok := netip.AddrFromSlice(msg.YourIPAddr.To4())
	if !ok || addr.IsUnspecified() {
		return Lease{}, fmt.Errorf("%w: address: none offered", ErrRefused)
	}
	ones := 32 // no mask: the most restrictive, as u-root's Packet4.Lease
	if m := msg.SubnetMask(); m != nil {
		var bits int
		ones, bits = m.Size()
		if bits != 32 {
			return Lease{}, fmt.Errorf("%w: subnet mask %s is not a contiguous IPv4 mask", ErrRefused, net.IP(m))
		}
	}
	l := Lease{Addr: netip.PrefixFrom(addr, ones)}
	if gws := msg.Router(); len(gws) > 0 {
		gw, ok := netip.AddrFromSlice(gws[0].To4())
		if !ok {
			return Lease{}, fmt.Errorf("%w: router %v is not IPv4", ErrRefused, gws[0])
		}
		l.Gateway = gw
	}
	if v := msg.Options.Get(dhcpv4.OptionInterfaceMTU); len(v) == 2 {
		l.MTU = int(v[0])<<8 | int(v[1])
	}
	for _, r := range msg.ClasslessStaticRoute() {
		l.Routes = append(l.Routes, *r)
	}
	l.DNS = msg.DNS()
	if sl := msg.DomainSearch(); sl != nil {
		l.Search = sl.Labels
	}
	l.Domain = msg.DomainName()
	return l, nil
}

// Install checks l (CheckLease) and sets its MTU, its address (valid and
// preferred lifetime forever) and its routes on ifname, and writes
// resolvConf unless it is "". A refused lease changes nothing. A step
// the kernel refuses (a route whose gateway it cannot reach) undoes the
// steps before it, so the interface is left as it was: no address
// without its routes, no MTU of a lease that was not taken.
func Install(ifname string, l Lease, resolvConf string) error {
	c, err := CheckLease(l)
	if err != nil {
		return err
	}
	return install(ifname, c, resolvConf)
}

// undo is a stack of steps that restore what an install changed.
type undo []func() error

// run undoes the steps in reverse order and returns their errors.
func (u undo) run() error {
	var errs []error
	for i := len(u) - 1; i >= 0; i-- {
		errs = append(errs, u[i]())
	}
	return errors.Join(errs...)
}

func install(ifname string, c Checked, resolvConf string) (err error) {
	l := c.l
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("link %s: %w", ifname, err)
	}
	in := &installer{link: link}
	defer func() {
		if err == nil {
			return
		}
		if rerr := in.undo.run(); rerr != nil {
			err = fmt.Errorf("%w; rolling back: %v", err, rerr)
		} else if len(in.undo) > 0 {
			err = fmt.Errorf("%w (rolled back)", err)
		}
	}()
	if err := in.setMTU(l.MTU); err != nil {
		return err
	}
	if err := in.addAddr(l.Addr); err != nil {
		return err
	}
	if err := in.routes(l); err != nil {
		return err
	}
	if resolvConf != "" && len(l.DNS) > 0 {
		if err := writeResolvConf(resolvConf, l); err != nil {
			return err
		}
	}
	return nil
}

// installer changes one link and records how to undo each change.
type installer struct {
	link   netlink.Link
	undo   undo
	before []netlink.Route // the IPv4 routes before the first route change
	listed bool            // before is read
}

func (in *installer) setMTU(mtu int) error {
	old := in.link.Attrs().MTU
	if mtu == 0 || mtu == old {
		return nil
	}
	if err := netlink.LinkSetMTU(in.link, mtu); err != nil {
		return fmt.Errorf("set mtu %d on %s: %w", mtu, in.link.Attrs().Name, err)
	}
	in.undo = append(in.undo, func() error { return netlink.LinkSetMTU(in.link, old) })
	return nil
}

// addAddr puts p on the link with both lifetimes forever.
func (in *installer) addAddr(p netip.Prefix) error {
	a := &netlink.Addr{IPNet: PrefixNet(p), ValidLft: Forever, PreferedLft: Forever}
	old, err := findAddr(in.link, p)
	if err != nil {
		return err
	}
	if err := netlink.AddrReplace(in.link, a); err != nil {
		return fmt.Errorf("add address %s to %s: %w", p, in.link.Attrs().Name, err)
	}
	if old != nil {
		in.undo = append(in.undo, func() error { return netlink.AddrReplace(in.link, old) })
	} else {
		in.undo = append(in.undo, func() error { return netlink.AddrDel(in.link, a) })
	}
	return nil
}

// replaceRoute installs rt; undone, the route it replaced comes back.
func (in *installer) replaceRoute(rt *netlink.Route) error {
	if !in.listed {
		var err error
		if in.before, err = netlink.RouteList(nil, netlink.FAMILY_V4); err != nil {
			return fmt.Errorf("list routes: %w", err)
		}
		in.listed = true
	}
	if err := netlink.RouteReplace(rt); err != nil {
		return err
	}
	if old := sameRoute(in.before, rt); old != nil {
		in.undo = append(in.undo, func() error { return netlink.RouteReplace(old) })
	} else {
		in.undo = append(in.undo, func() error { return netlink.RouteDel(rt) })
	}
	return nil
}

// routes installs the classless routes of l, or else its default route.
func (in *installer) routes(l Lease) error {
	ifname, idx := in.link.Attrs().Name, in.link.Attrs().Index
	if len(l.Routes) > 0 {
		for _, r := range l.Routes {
			rt := &netlink.Route{LinkIndex: idx, Dst: r.Dest, Gw: r.Router}
			if r.Router == nil || r.Router.IsUnspecified() {
				rt.Gw, rt.Scope = nil, netlink.SCOPE_LINK
			}
			if err := in.replaceRoute(rt); err != nil {
				return fmt.Errorf("route %s via %s dev %s: %w", r.Dest, r.Router, ifname, err)
			}
		}
		return nil
	}
	if !l.Gateway.IsValid() {
		return nil
	}
	if !l.Addr.Masked().Contains(l.Gateway) {
		// A gateway outside the leased subnet (a /32 lease) needs a
		// link route to itself first.
		host := &netlink.Route{LinkIndex: idx, Dst: PrefixNet(netip.PrefixFrom(l.Gateway, 32)), Scope: netlink.SCOPE_LINK}
		if err := in.replaceRoute(host); err != nil {
			return fmt.Errorf("route %s dev %s: %w", l.Gateway, ifname, err)
		}
	}
	if err := in.replaceRoute(&netlink.Route{LinkIndex: idx, Gw: net.IP(l.Gateway.AsSlice())}); err != nil {
		return fmt.Errorf("default route via %s dev %s: %w", l.Gateway, ifname, err)
	}
	return nil
}

// findAddr returns the address p on link as the kernel holds it, or nil.
func findAddr(link netlink.Link, p netip.Prefix) (*netlink.Addr, error) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	for i := range addrs {
		ones, _ := addrs[i].Mask.Size()
		if addrs[i].IP.Equal(net.IP(p.Addr().AsSlice())) && ones == p.Bits() {
			return &addrs[i], nil
		}
	}
	return nil, nil
}

// sameRoute finds the route of routes that RouteReplace(rt) replaces:
// the same destination, metric, TOS, table (main when unset) and type
// (unicast when unset).
func sameRoute(routes []netlink.Route, rt *netlink.Route) *netlink.Route {
	key := func(r *netlink.Route) string {
		dst := "0.0.0.0/0"
		if r.Dst != nil {
			dst = r.Dst.String()
		}
		table, typ := r.Table, r.Type
		if table == 0 {
			table = unix.RT_TABLE_MAIN
		}
		if typ == 0 {
			typ = unix.RTN_UNICAST
		}
		// The type too: a kernel without IP_MULTIPLE_TABLES (the
		// appliance's) keeps its local and broadcast routes in main.
		return fmt.Sprint(dst, r.Priority, r.Tos, table, typ)
	}
	want := key(rt)
	for i := range routes {
		if key(&routes[i]) == want {
			return &routes[i]
		}
	}
	return nil
}

// writeResolvConf writes the lease's DNS settings to path, replacing the
// file at once (a temporary file renamed over it), so a reader never sees
// half a file. Every value passed CheckLease: addresses, and DNS names
// that hold no space or line break, so each is one token of one line.
// dhclient.WriteDNSSettings writes the same lines but in place.
func writeResolvConf(path string, l Lease) error {
	var b strings.Builder
	if l.Domain != "" {
		fmt.Fprintf(&b, "domain %s\n", l.Domain)
	}
	for _, ip := range l.DNS {
		fmt.Fprintf(&b, "nameserver %s\n", ip)
	}
	if len(l.Search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(l.Search, " "))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
