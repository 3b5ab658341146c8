package netconf6

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
)

// Lease is an IPv6 address to install and where it came from.
type Lease struct {
	// Addr is the address with its prefix length: /128 for a DHCPv6
	// IA_NA address (the on-link prefix comes from the router
	// advertisement, as on EC2), the configured prefix when static.
	Addr netip.Prefix
	// Gateway is the static default gateway; a DHCPv6 or SLAAC lease
	// takes the router advertisement's default route instead.
	Gateway netip.Addr
	// Server is the DHCPv6 server's DUID, "" when not by DHCPv6.
	Server string
	// Offered is the valid lifetime the server offered; the address is
	// installed with forever all the same (see the package doc).
	Offered time.Duration
	DNS     []netip.Addr
	// Exchange lists the DHCPv6 messages of the exchange, in order
	// (solicit,advertise,request,reply): one exchange, no renewal.
	Exchange []string
}

// RequestLease runs one DHCPv6 exchange for an IA_NA address on ifname
// with insomniacslk/dhcp's client: solicit, advertise, request, reply.
// The client's UDP socket (bound to the link-local address, port 546) is
// closed before it returns; it never opens a packet socket.
func RequestLease(ctx context.Context, ifname string, timeout time.Duration, retries int) (Lease, error) {
	c, err := nclient6.New(ifname, nclient6.WithTimeout(timeout), nclient6.WithRetry(retries))
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 client on %s: %w", ifname, err)
	}
	defer c.Close()
	adv, err := c.Solicit(ctx)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: solicit: %w", ifname, err)
	}
	reply, err := c.Request(ctx, adv)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: request: %w", ifname, err)
	}
	l, err := fromReply(reply)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: %w", ifname, err)
	}
	l.Exchange = []string{"solicit", "advertise", "request", "reply"}
	return l, nil
}

// fromReply takes the IA_NA address, the server and the DNS servers out of
// a DHCPv6 Reply.
func fromReply(m *dhcpv6.Message) (Lease, error) {
	if m.MessageType != dhcpv6.MessageTypeReply {
		return Lease{}, fmt.Errorf("%s instead of a reply", m.MessageType)
	}
	if st := m.Options.Status(); st != nil && st.StatusCode != 0 {
		return Lease{}, fmt.Errorf("server status %s: %s", st.StatusCode, st.StatusMessage)
	}
	iana := m.Options.OneIANA()
	if iana == nil {
		return Lease{}, errors.New("reply without IA_NA")
	}
	if st := iana.Options.Status(); st != nil && st.StatusCode != 0 {
		return Lease{}, fmt.Errorf("IA_NA status %s: %s", st.StatusCode, st.StatusMessage)
	}
	ia := iana.Options.OneAddress()
	if ia == nil {
		return Lease{}, errors.New("IA_NA without an address")
	}
	a, ok := netip.AddrFromSlice(ia.IPv6Addr)
	if !ok || !a.Is6() || a.Is4In6() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() {
		return Lease{}, fmt.Errorf("IA_NA address %v is not a global unicast IPv6 address", ia.IPv6Addr)
	}
	l := Lease{Addr: netip.PrefixFrom(a, 128), Offered: ia.ValidLifetime}
	if id := m.Options.ServerID(); id != nil {
		l.Server = strings.ReplaceAll(fmt.Sprintf("%x", id.ToBytes()), " ", "")
	}
	for _, ip := range m.Options.DNS() {
		if d, ok := netip.AddrFromSlice(ip); ok {
			l.DNS = append(l.DNS, d)
		}
	}
	return l, nil
}
