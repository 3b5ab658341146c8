package netconf6

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

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
// closed before it returns; it never opens a packet socket. An
// advertisement or reply for another client or IAID, or with an address
// CheckLease refuses, fails the exchange (ErrRefused).
func RequestLease(ctx context.Context, ifname string, timeout time.Duration, retries int) (Lease, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 client on %s: %w", ifname, err)
	}
	me, err := identity(ifi.HardwareAddr)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 client on %s: %w", ifname, err)
	}
	c, err := nclient6.New(ifname, nclient6.WithTimeout(timeout), nclient6.WithRetry(retries))
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 client on %s: %w", ifname, err)
	}
	defer c.Close()
	adv, err := c.Solicit(ctx, me.modifiers()...)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: solicit: %w", ifname, err)
	}
	if _, err := me.checkMessage(adv); err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: %w", ifname, err)
	}
	reply, err := c.Request(ctx, adv)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: request: %w", ifname, err)
	}
	l, err := parseReply(reply, me)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: %w", ifname, err)
	}
	l.Exchange = []string{"solicit", "advertise", "request", "reply"}
	return l, nil
}
