package imds

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Base6 is the IPv6 endpoint of the metadata service, on Nitro instances
// whose metadata options enable it (HttpProtocolIpv6=enabled; the default
// is disabled, even in an IPv6-only subnet).
const Base6 = "http://[fd00:ec2::254]"

// Bases lists the endpoints to try in order: IPv4 first where the
// instance has IPv4 (the endpoint every instance has), then IPv6 where it
// has IPv6.
func Bases(v4, v6 bool) []string {
	var out []string
	if v4 {
		out = append(out, DefaultBase)
	}
	if v6 {
		out = append(out, Base6)
	}
	return out
}

// ErrIPv6Disabled says the IPv6 endpoint did not answer where it was the
// only way (or the last one) to the service: on EC2 that is the
// instance's metadata options with HttpProtocolIpv6 disabled.
var ErrIPv6Disabled = errors.New("the IPv6 endpoint " + Base6 + " did not answer: the instance's metadata options have " +
	"HttpProtocolIpv6 disabled (the default), or the subnet is not on Nitro")

// Choose fetches a session token from each of bases in turn (with the
// client's attempts) and keeps the first that answers as c.Base, which it
// returns. When none answers, the error names each endpoint's failure;
// it wraps ErrIPv6Disabled when an IPv6 endpoint was among them.
func (c *Client) Choose(ctx context.Context, bases []string) (string, error) {
	if len(bases) == 0 {
		return "", errors.New("imds: no address family to reach the metadata service (IPv4 and IPv6 both off)")
	}
	var errs []string
	v6 := false
	for _, b := range bases {
		c.Base = b
		_, err := c.Token(ctx)
		if err == nil {
			return b, nil
		}
		errs = append(errs, err.Error())
		v6 = v6 || isV6(b)
		if ctx.Err() != nil {
			break
		}
	}
	err := fmt.Errorf("imds: no endpoint answered: %s", strings.Join(errs, "; "))
	if v6 {
		err = fmt.Errorf("%w; %w", ErrIPv6Disabled, err)
	}
	return "", err
}

// isV6 says whether base's host is an IPv6 literal.
func isV6(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(u.Hostname())
	return err == nil && a.Is6() && !a.Is4In6()
}
