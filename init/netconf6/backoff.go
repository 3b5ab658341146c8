package netconf6

import (
	"context"
	"fmt"
	"time"

	"github.com/hotpath-dev/hotpath/init/netconf"
)

// requestOnSchedule takes a DHCPv6 lease with DHCPv4's back-off
// (netconf.Schedule): each exchange is one solicit and one request with
// a single try of the library (whose own retries double without a
// bound), o.DHCPTimeout doubling up to o.BackoffMax, at most
// o.DHCPRetries exchanges (0: until ctx ends).
func requestOnSchedule(ctx context.Context, o Options) (Lease, error) {
	var l Lease
	_, err := netconf.Retry(ctx, netconf.Schedule{First: o.DHCPTimeout, Max: o.BackoffMax, Tries: o.DHCPRetries},
		func(ctx context.Context, timeout time.Duration) error {
			var err error
			l, err = RequestLease(ctx, o.Interface, timeout, 1)
			return err
		})
	if err != nil {
		return Lease{}, fmt.Errorf("dhcpv6 %s: no lease: %w", o.Interface, err)
	}
	return l, nil
}
