package netconf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Limits on what a lease may install. A DHCP server is a peer on the
// network, not a part of the appliance: what it says is parsed into a
// Checked lease, and Install puts nothing else on an interface.
const (
	// MinMTU is the smallest MTU a lease may set: every IPv4 host must
	// take 576-byte datagrams (RFC 791, RFC 1122 3.3.2). Option 26
	// allows 68, which the kernel takes, and at 68 bytes a TCP segment
	// carries 8 bytes of payload: the workload stops answering.
	MinMTU = 576
	// MaxMTU is the largest: the IPv4 total length field.
	MaxMTU = 65535
	// MaxRoutes bounds the classless static routes (option 121) taken
	// from one lease. One option carries at most 255 bytes (about 50
	// routes), but RFC 3396 lets a server concatenate as many as it
	// likes; 64 is more than any network this appliance serves has.
	MaxRoutes = 64
	// MaxDNS is how many nameservers are kept: glibc's resolver and Go's
	// read the first three (MAXNS) and ignore the rest.
	MaxDNS = 3
	// MaxSearch is how many search domains are kept: glibc before 2.26
	// read six (MAXDNSRCH), and each one multiplies the queries of every
	// lookup of a short name.
	MaxSearch = 6
)

// ErrRefused is wrapped by every error of CheckLease: the network offered
// a lease that must not be installed.
var ErrRefused = errors.New("lease refused")

// refused is the error of one refused field.
func refused(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrRefused, field, fmt.Sprintf(format, args...))
}

// Checked is a lease CheckLease accepted. It is the only form in which a
// lease reaches the interface (install takes nothing else), so no path,
// the static configuration's included, installs an unchecked one.
type Checked struct{ l Lease }

// Lease is the accepted lease.
func (c Checked) Lease() Lease { return c.l }

// CheckLease parses l into a Checked lease, or refuses it with the reason
// (the error wraps ErrRefused). It refuses:
//   - an address that is not IPv4 unicast a host may hold: unspecified,
//     0.0.0.0/8, loopback, link-local, multicast, 240.0.0.0/4, the
//     limited broadcast; the subnet's network or broadcast address (but
//     /31, RFC 3021, and /32 have none); a /0 prefix;
//   - a default gateway that is not such an address, is the lease's own
//     address or the subnet's network or broadcast address, or lies off
//     the subnet (allowed only for a /32 lease, a provider's routed
//     address, which gets a link route to the gateway; and moot when
//     classless routes replace the router option);
//   - an MTU outside [MinMTU, MaxMTU] (0 leaves the MTU alone);
//   - more than MaxRoutes classless routes, a route whose destination is
//     not a canonical IPv4 prefix or whose router is not unicast;
//   - a nameserver that is not unicast (loopback included: nothing on
//     the appliance resolves names), a domain or search name that is not
//     a DNS name (a newline in option 15 wrote a line of the server's
//     choosing into resolv.conf).
//
// Nameservers past MaxDNS and search domains past MaxSearch are dropped,
// as the resolvers that read resolv.conf would ignore them.
func CheckLease(l Lease) (Checked, error) {
	if !l.Addr.IsValid() {
		return Checked{}, refused("address", "missing")
	}
	if err := checkAddr(l.Addr); err != nil {
		return Checked{}, err
	}
	if l.Gateway.IsValid() {
		if err := checkGateway(l.Addr, l.Gateway, len(l.Routes) > 0); err != nil {
			return Checked{}, err
		}
	}
	if l.MTU != 0 && (l.MTU < MinMTU || l.MTU > MaxMTU) {
		return Checked{}, refused("mtu", "%d outside [%d, %d]", l.MTU, MinMTU, MaxMTU)
	}
	if len(l.Routes) > MaxRoutes {
		return Checked{}, refused("classless routes", "%d, more than %d", len(l.Routes), MaxRoutes)
	}
	for _, r := range l.Routes {
		if err := checkRoute(l.Addr, r.Dest, r.Router); err != nil {
			return Checked{}, err
		}
	}
	for _, ip := range l.DNS {
		a, ok := netip.AddrFromSlice(ip)
		a = a.Unmap()
		if !ok || !a.Is4() {
			return Checked{}, refused("nameserver", "%v is not an IPv4 address", ip)
		}
		if why := notUnicast4(a); why != "" {
			return Checked{}, refused("nameserver", "%s is %s", a, why)
		}
	}
	if len(l.DNS) > MaxDNS {
		l.DNS = l.DNS[:MaxDNS:MaxDNS]
	}
	if l.Domain != "" {
		if err := CheckDNSName(l.Domain); err != nil {
			return Checked{}, refused("domain name (option 15)", "%v", err)
		}
	}
	for _, s := range l.Search {
		if err := CheckDNSName(s); err != nil {
			return Checked{}, refused("search domain (option 119)", "%v", err)
		}
	}
	if len(l.Search) > MaxSearch {
		l.Search = l.Search[:MaxSearch:MaxSearch]
	}
	return Checked{l: l}, nil
}

// notUnicast4 says why a is not an address a host on the network may
// hold or route through, or "" if it is.
func notUnicast4(a netip.Addr) string {
	b := a.As4()
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the limited broadcast address"
	case b[0] == 0:
		return "in 0.0.0.0/8 (this network)"
	case a.IsLoopback():
		return "loopback"
	case a.IsMulticast():
		return "multicast"
	case b[0] >= 240:
		return "in 240.0.0.0/4 (reserved)"
	case a.IsLinkLocalUnicast():
		return "link-local (169.254.0.0/16 is self-assigned, never leased)"
	}
	return ""
}

// special says whether a is the network or broadcast address of p's
// subnet, which no host holds (a /31 or /32 has none), or "".
func special(p netip.Prefix, a netip.Addr) string {
	if p.Bits() >= 31 {
		return ""
	}
	if a == p.Masked().Addr() {
		return "the network address of " + p.Masked().String()
	}
	if a == broadcast(p) {
		return "the broadcast address of " + p.Masked().String()
	}
	return ""
}

// broadcast is the subnet broadcast address of the IPv4 prefix p.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

func checkAddr(p netip.Prefix) error {
	a := p.Addr()
	if !a.Is4() {
		return refused("address", "%s is not IPv4", p)
	}
	if p.Bits() <= 0 || p.Bits() > 32 {
		return refused("address", "%s: prefix length %d (a /0 puts every address on the link)", p, p.Bits())
	}
	if why := notUnicast4(a); why != "" {
		return refused("address", "%s is %s", p, why)
	}
	if why := special(p, a); why != "" {
		return refused("address", "%s is %s", p, why)
	}
	return nil
}

func checkGateway(p netip.Prefix, gw netip.Addr, routes bool) error {
	if !gw.Is4() {
		return refused("router", "%s is not IPv4", gw)
	}
	if why := notUnicast4(gw); why != "" {
		return refused("router", "%s is %s", gw, why)
	}
	if gw == p.Addr() {
		return refused("router", "%s is the lease's own address", gw)
	}
	if why := special(p, gw); why != "" {
		return refused("router", "%s is %s", gw, why)
	}
	if !routes && p.Bits() < 32 && !p.Masked().Contains(gw) {
		return refused("router", "%s is outside the leased subnet %s and no classless route leads to it", gw, p.Masked())
	}
	return nil
}

// checkRoute checks one classless static route. Whether its router is
// reachable (on the subnet, or through an earlier route of the list, as
// Google Cloud's /32 leases do) is the kernel's judgement when the route
// is installed; a refusal there rolls the whole lease back.
func checkRoute(p netip.Prefix, dst *net.IPNet, router net.IP) error {
	if dst == nil {
		return refused("classless route", "without a destination")
	}
	ones, bits := dst.Mask.Size()
	d, ok := netip.AddrFromSlice(dst.IP)
	d = d.Unmap()
	if !ok || !d.Is4() || bits != 32 {
		return refused("classless route", "destination %v is not an IPv4 prefix", dst)
	}
	dp := netip.PrefixFrom(d, ones)
	if dp.Masked() != dp {
		return refused("classless route", "destination %v has host bits set", dst)
	}
	if ones > 0 && (d.IsMulticast() || d.IsLoopback() || d.As4()[0] >= 240) {
		return refused("classless route", "destination %s is not unicast", dp)
	}
	if router == nil || router.IsUnspecified() {
		return nil // on-link
	}
	r, ok := netip.AddrFromSlice(router)
	r = r.Unmap()
	if !ok || !r.Is4() {
		return refused("classless route", "%s via %v: router is not IPv4", dp, router)
	}
	if why := notUnicast4(r); why != "" {
		return refused("classless route", "%s via %s: router is %s", dp, r, why)
	}
	if r == p.Addr() {
		return refused("classless route", "%s via %s: router is the lease's own address", dp, r)
	}
	return nil
}

// CheckDNSName reports whether s is a domain name that may be written
// into resolv.conf: at most 253 bytes, dot-separated labels of 1 to 63
// letters, digits, hyphens and underscores (SRV-style names), no hyphen
// at either end of a label, one trailing dot allowed. Everything else
// (a space, a newline, a NUL, a backslash escape) is refused: resolv.conf
// has no quoting.
func CheckDNSName(s string) error {
	name := strings.TrimSuffix(s, ".")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("%s: length %d not in [1, 253]", strconv.QuoteToASCII(s), len(name))
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return fmt.Errorf("%s: label of length %d", strconv.QuoteToASCII(s), len(label))
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%s: label %q begins or ends with a hyphen", strconv.QuoteToASCII(s), label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%s: byte %q is not allowed in a DNS name", strconv.QuoteToASCII(s), c)
			}
		}
	}
	return nil
}
