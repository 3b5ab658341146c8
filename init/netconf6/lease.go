package netconf6

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/hotpath-dev/hotpath/init/netconf"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Limits on what a DHCPv6 reply may set.
const (
	// MaxDNS is how many DNS servers are kept (resolvers read three).
	MaxDNS = 3
	// maxDUID is the longest DUID RFC 8415 (11.1) allows: a 2-byte type
	// and at most 128 bytes; the server's is printed in the report.
	maxDUID = 130
)

// ErrRefused is wrapped by every error of CheckLease and of the parsing
// of a DHCPv6 message: the network offered what must not be installed.
var ErrRefused = errors.New("lease refused")

func refused(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrRefused, field, fmt.Sprintf(format, args...))
}

// Checked is a lease CheckLease accepted, the only form install takes.
type Checked struct{ l Lease }

// Lease is the accepted lease.
func (c Checked) Lease() Lease { return c.l }

// CheckLease parses l into a Checked lease or refuses it with the reason
// (wrapping ErrRefused): the address must be one a host may hold (not
// unspecified, loopback, in ::/8 (IPv4-compatible such as ::127.0.0.1),
// IPv4-mapped, link-local, site-local, multicast), with a prefix of 1 to
// 128 bits and not the subnet-router anycast address of its prefix; the
// gateway link-local or such a unicast address inside the prefix, not the
// address itself; the DNS servers unicast and not link-local (no zone to
// reach one by); a DHCPv6 server's DUID at most 130 bytes. DNS servers
// past MaxDNS are dropped.
func CheckLease(l Lease) (Checked, error) {
	if !l.Addr.IsValid() {
		return Checked{}, refused("address", "missing")
	}
	a := l.Addr.Addr()
	if why := notUnicast6(a); why != "" {
		return Checked{}, refused("address", "%s is %s", l.Addr, why)
	}
	if a.IsLinkLocalUnicast() {
		return Checked{}, refused("address", "%s is link-local (the kernel makes the interface's own)", l.Addr)
	}
	if b := l.Addr.Bits(); b <= 0 || b > 128 {
		return Checked{}, refused("address", "%s: prefix length %d", l.Addr, b)
	}
	if l.Addr.Bits() < 127 && a == l.Addr.Masked().Addr() {
		return Checked{}, refused("address", "%s is the subnet-router anycast address of %s", l.Addr, l.Addr.Masked())
	}
	if gw := l.Gateway; gw.IsValid() {
		if why := notUnicast6(gw); why != "" {
			return Checked{}, refused("gateway", "%s is %s", gw, why)
		}
		if gw == a {
			return Checked{}, refused("gateway", "%s is the lease's own address", gw)
		}
		if !gw.IsLinkLocalUnicast() && !l.Addr.Masked().Contains(gw) {
			return Checked{}, refused("gateway", "%s is neither link-local nor inside %s", gw, l.Addr.Masked())
		}
	}
	for _, d := range l.DNS {
		if why := notUnicast6(d); why != "" {
			return Checked{}, refused("DNS server", "%s is %s", d, why)
		}
		if d.IsLinkLocalUnicast() {
			return Checked{}, refused("DNS server", "%s is link-local", d)
		}
	}
	if len(l.DNS) > MaxDNS {
		l.DNS = l.DNS[:MaxDNS:MaxDNS]
	}
	if len(l.Server) > 2*maxDUID {
		return Checked{}, refused("server DUID", "of %d bytes, more than %d", len(l.Server)/2, maxDUID)
	}
	return Checked{l: l}, nil
}

// notUnicast6 says why a is not a unicast IPv6 address another host may
// be reached at, or "" if it is. Link-local is left to the caller.
func notUnicast6(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "missing"
	case a.Is4():
		return "IPv4"
	case a.Is4In6():
		return "IPv4-mapped"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsMulticast():
		return "multicast"
	case a.As16()[0] == 0:
		return "in ::/8 (reserved: IPv4-compatible and loopback addresses)"
	case netip.MustParsePrefix("fec0::/10").Contains(a):
		return "site-local (deprecated, RFC 3879)"
	}
	return ""
}

// ours is what the client put in its Solicit: a reply must echo it.
type ours struct {
	clientID dhcpv6.DUID
	iaid     [4]byte
}

// identity is the client's DUID and IAID for the interface with
// hardware address hw: the DUID-LLT and the IAID (the address's last
// four bytes) nclient6's Solicit would make, made here so that the
// advertisement and the reply can be checked against them.
func identity(hw net.HardwareAddr) (ours, error) {
	if len(hw) < 4 {
		return ours{}, fmt.Errorf("hardware address %v too short for an IAID", hw)
	}
	var o ours
	copy(o.iaid[:], hw[len(hw)-4:])
	o.clientID = &dhcpv6.DUIDLLT{HWType: iana.HWTypeEthernet, Time: dhcpv6.GetTime(), LinkLayerAddr: hw}
	return o, nil
}

// modifiers make the Solicit carry o's identity.
func (o ours) modifiers() []dhcpv6.Modifier {
	return []dhcpv6.Modifier{dhcpv6.WithClientID(o.clientID), dhcpv6.WithIAID(o.iaid)}
}

// checkMessage refuses an Advertise or Reply that is not for this
// client: another client's DUID, or no IA_NA with our IAID (the Request
// copies the Advertise's IA_NA, so a foreign one there would be asked
// for and installed). It returns our IA_NA.
func (o ours) checkMessage(m *dhcpv6.Message) (*dhcpv6.OptIANA, error) {
	if id := m.Options.ClientID(); id == nil || !bytes.Equal(id.ToBytes(), o.clientID.ToBytes()) {
		return nil, refused(m.MessageType.String(), "for client %s, not ours", duidHex(id))
	}
	for _, ia := range m.Options.IANA() {
		if ia.IaId == o.iaid {
			return ia, nil
		}
	}
	var got []string
	for _, ia := range m.Options.IANA() {
		got = append(got, fmt.Sprintf("%x", ia.IaId))
	}
	if len(got) == 0 {
		return nil, refused(m.MessageType.String(), "without IA_NA")
	}
	return nil, refused(m.MessageType.String(), "IA_NA with IAID %s, not ours (%x)", strings.Join(got, ","), o.iaid)
}

func duidHex(d dhcpv6.DUID) string {
	if d == nil {
		return "none"
	}
	b := d.ToBytes()
	if len(b) > maxDUID {
		return fmt.Sprintf("%x...", b[:maxDUID])
	}
	return fmt.Sprintf("%x", b)
}

// parseReply parses a DHCPv6 Reply into a Checked lease: the IA_NA with
// our IAID, its first address and lifetimes, the server and the DNS
// servers.
func parseReply(m *dhcpv6.Message, o ours) (Lease, error) {
	if m.MessageType != dhcpv6.MessageTypeReply {
		return Lease{}, fmt.Errorf("%s instead of a reply", m.MessageType)
	}
	if st := m.Options.Status(); st != nil && st.StatusCode != 0 {
		return Lease{}, fmt.Errorf("server status %s: %q", st.StatusCode, st.StatusMessage)
	}
	ia, err := o.checkMessage(m)
	if err != nil {
		return Lease{}, err
	}
	if st := ia.Options.Status(); st != nil && st.StatusCode != 0 {
		return Lease{}, fmt.Errorf("IA_NA status %s: %q", st.StatusCode, st.StatusMessage)
	}
	addr := ia.Options.OneAddress()
	if addr == nil {
		return Lease{}, refused("IA_NA", "without an address")
	}
	a, ok := netip.AddrFromSlice(addr.IPv6Addr)
	if !ok || len(addr.IPv6Addr) != net.IPv6len {
		return Lease{}, refused("IA_NA address", "%v is not IPv6", addr.IPv6Addr)
	}
	if addr.ValidLifetime == 0 {
		return Lease{}, refused("IA_NA address", "%s with valid lifetime 0 (withdrawn)", a)
	}
	if addr.PreferredLifetime > addr.ValidLifetime {
		return Lease{}, refused("IA_NA address", "%s preferred lifetime %v beyond valid lifetime %v (RFC 8415 21.6)", a, addr.PreferredLifetime, addr.ValidLifetime)
	}
	l := Lease{Addr: netip.PrefixFrom(a, 128), Offered: addr.ValidLifetime}
	if id := m.Options.ServerID(); id != nil {
		b := id.ToBytes()
		if len(b) > maxDUID {
			return Lease{}, refused("server DUID", "of %d bytes, more than %d", len(b), maxDUID)
		}
		l.Server = fmt.Sprintf("%x", b)
	}
	for _, ip := range m.Options.DNS() {
		d, ok := netip.AddrFromSlice(ip)
		if !ok {
			return Lease{}, refused("DNS server", "%v is not an address", ip)
		}
		l.DNS = append(l.DNS, d)
	}
	c, err := CheckLease(l)
	if err != nil {
		return Lease{}, err
	}
	return c.Lease(), nil
}

// Install checks l (CheckLease) and puts its address on ifname with
// valid and preferred lifetime forever, without duplicate address
// detection (the address is the network's assignment, and DAD would hold
// it unusable for a second), and l.Gateway's default route when it has
// one. A refused lease changes nothing; when the kernel refuses the
// route, the address is taken off again (or the one it replaced put
// back), so the interface is left as it was.
func Install(ifname string, l Lease) error {
	c, err := CheckLease(l)
	if err != nil {
		return err
	}
	return install(ifname, c)
}

func install(ifname string, c Checked) error {
	l := c.l
	link, err := netconf.LinkUp(ifname)
	if err != nil {
		return err
	}
	a := &netlink.Addr{
		IPNet:       netconf.PrefixNet(l.Addr),
		ValidLft:    netconf.Forever,
		PreferedLft: netconf.Forever,
		Flags:       unix.IFA_F_NODAD,
	}
	old, err := findAddr(link, l.Addr)
	if err != nil {
		return err
	}
	if err := netlink.AddrReplace(link, a); err != nil {
		return fmt.Errorf("add address %s to %s: %w", l.Addr, ifname, err)
	}
	if !l.Gateway.IsValid() {
		return nil
	}
	rt := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(l.Gateway.AsSlice()),
		Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
	if err := netlink.RouteReplace(rt); err != nil {
		err = fmt.Errorf("IPv6 default route via %s dev %s: %w", l.Gateway, ifname, err)
		var rerr error
		if old != nil {
			rerr = netlink.AddrReplace(link, old)
		} else {
			rerr = netlink.AddrDel(link, a)
		}
		if rerr != nil {
			return fmt.Errorf("%w; rolling back: %v", err, rerr)
		}
		return fmt.Errorf("%w (rolled back)", err)
	}
	return nil
}

// findAddr returns the address p on link as the kernel holds it, or nil.
func findAddr(link netlink.Link, p netip.Prefix) (*netlink.Addr, error) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("list IPv6 addresses of %s: %w", link.Attrs().Name, err)
	}
	for i := range addrs {
		ones, _ := addrs[i].Mask.Size()
		if addrs[i].IP.Equal(net.IP(p.Addr().AsSlice())) && ones == p.Bits() {
			return &addrs[i], nil
		}
	}
	return nil, nil
}
