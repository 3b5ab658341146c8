package netconf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule is how long each DHCP exchange waits for its answer, for
// DHCPv4 and DHCPv6 alike. insomniacslk/dhcp's clients double their read
// timeout on every retry without a bound (nclient4 and nclient6
// retryFn): 5+10+20+40+80 s at 5 s × 5, about 155 s before a boot with
// no DHCP server gave up. The init therefore asks the library for one try
// per exchange and runs the retries itself, doubling from First up to Max
// (net.dhcp_backoff_max). The library has no option for a cap; a wrapper
// of a dozen lines is the smaller change than a fork.
type Schedule struct {
	First time.Duration // the first exchange's timeout (net.dhcp_timeout)
	Max   time.Duration // no exchange waits longer (net.dhcp_backoff_max); 0: no cap
	Tries int           // exchanges before giving up; 0: until ctx ends
}

// Timeout is the timeout of exchange i (0 is the first): First doubled i
// times, capped at Max.
func (s Schedule) Timeout(i int) time.Duration {
	t := s.First
	if t <= 0 {
		t = time.Second
	}
	for ; i > 0 && (s.Max <= 0 || t < s.Max); i-- {
		t *= 2
	}
	if s.Max > 0 && t > s.Max {
		t = s.Max
	}
	return t
}

// Exchange is one DHCP exchange that gives up after timeout.
type Exchange func(ctx context.Context, timeout time.Duration) error

// Retry runs exchange with the timeouts of s until it succeeds, s.Tries
// exchanges failed, or ctx ends (the boot's network deadline). It returns
// the number of exchanges run and nil, or an error that says why it gave
// up and each exchange's timeout and error.
func Retry(ctx context.Context, s Schedule, exchange Exchange) (int, error) {
	var tried []string
	var last error
	for i := 0; s.Tries <= 0 || i < s.Tries; i++ {
		if ctx.Err() != nil {
			break
		}
		t := s.Timeout(i)
		err := exchange(ctx, t)
		if err == nil {
			return i + 1, nil
		}
		last = err
		tried = append(tried, t.String())
	}
	why := fmt.Sprintf("%d exchanges", len(tried))
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		why = "network deadline reached after " + why
	case ctx.Err() != nil:
		why = "cancelled after " + why
	}
	if last == nil {
		last = ctx.Err()
	}
	return len(tried), fmt.Errorf("%s (timeouts %s): %w", why, strings.Join(tried, ","), last)
}
