package timesync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/beevik/ntp"
)

// AmazonTimeSync6 is Amazon Time Sync's IPv6 address on Nitro instances,
// in the bracketed form the NTP client takes.
const AmazonTimeSync6 = "[fd00:ec2::123]"

// Choose returns the first of servers (in order: IPv4 first where the
// instance has IPv4) that gives a valid answer, each within timeout: the
// family choice of time.ntp=auto on an instance that may be dual-stack or
// IPv6-only. The errors of those that did not answer are joined.
func Choose(ctx context.Context, servers []string, timeout time.Duration) (string, error) {
	if len(servers) == 1 {
		return servers[0], nil // nothing to choose; the first sync says whether it answers
	}
	var errs []string
	for _, s := range servers {
		r, err := ntp.QueryWithOptions(s, ntp.QueryOptions{Timeout: timeout,
			Dialer: func(la, ra string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "udp", ra)
			}})
		if err == nil {
			err = r.Validate()
		}
		if err == nil {
			return s, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", s, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return "", errors.New("timesync: no server to choose from")
	}
	return "", fmt.Errorf("timesync: no server answered: %s", strings.Join(errs, "; "))
}
