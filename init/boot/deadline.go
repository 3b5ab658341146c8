package boot

import (
	"context"
	"time"
)

// Before returns s bounded by deadline: its apply and verify run under a
// context that ends then, so that several steps share one deadline (the
// boot's network steps: net.deadline). A step past it fails with the
// reason its own code gives for the ended context; what happens next (a
// background retry) is the caller's.
func Before(deadline time.Time, s Step) Step {
	bounded := s
	bounded.Apply = func(ctx context.Context, d Detail) error {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		return s.Apply(ctx, d)
	}
	if s.Verify != nil {
		bounded.Verify = func(ctx context.Context, d Detail) error {
			// The verify reads back what apply installed; it gets the
			// parent's context, so a lease taken a moment before the
			// deadline is still verified rather than failed.
			return s.Verify(ctx, d)
		}
	}
	return bounded
}
