// Package eventual retries what AWS's eventual consistency shows a caller
// right after it created something: a describe (or a call naming the new
// resource) that answers it does not exist. The EC2 API Reference
// ("Eventual consistency in the Amazon EC2 API") says such an answer may
// come for a resource just created and asks callers to retry with an
// exponential back-off; Auto Scaling and Parameter Store behave alike.
// The SDK's waiters stop at the first error they have no acceptor for, so
// one InvalidAMIID.NotFound after RegisterImage would end a build (and
// delete what it made). Every wait of the plugin goes through here: a
// "not found" is retried, a bounded number of times, before anything is
// called failed.
package eventual

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Looks is how many answers "not found" one wait takes for a resource the
// plugin created before it gives up: with the back-off of Do (delay,
// doubling up to 4×delay) the 9 sleeps between them are 1+2+4·7 = 31 poll
// intervals, about 2.5 minutes at hotpath-ami's default 5 s (the SDK
// waiters' own back-off between poll_interval and 4× is of the same
// order); EC2's eventual consistency lasts seconds, rarely minutes.
const Looks = 10

// maxFactor caps Do's back-off at this multiple of its first delay, like
// the waiters' MaxDelay = 4 × poll_interval.
const maxFactor = 4

// NotFoundError is the answer after Looks misses.
type NotFoundError struct {
	Looks int
	Err   error // the last answer
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("still not found after %d looks (AWS is eventually consistent, but not this late): %v", e.Looks, e.Err)
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// Retryable wraps an SDK waiter's Retryable (the function its options
// hold, deciding from each answer whether to go on polling): an error
// isNotFound accepts is retried — the waiter's own back-off between
// MinDelay and MaxDelay applies — until Looks of them came, then the wait
// fails with a *NotFoundError. Every other answer goes to next. Use one
// per wait: it counts.
func Retryable[In, Out any](isNotFound func(error) bool, next func(context.Context, *In, *Out, error) (bool, error)) func(context.Context, *In, *Out, error) (bool, error) {
	misses := 0
	return func(ctx context.Context, in *In, out *Out, err error) (bool, error) {
		if err != nil && isNotFound(err) {
			misses++
			if misses < Looks {
				return true, nil
			}
			return false, &NotFoundError{Looks: misses, Err: err}
		}
		return next(ctx, in, out, err)
	}
}

// Do calls fn until it returns nil or an error isNotFound does not
// accept, at most Looks times, sleeping delay after the first miss and
// twice as long after each further one, up to 4×delay. After Looks misses
// it returns a *NotFoundError; a cancelled ctx ends it with ctx's error.
func Do(ctx context.Context, delay time.Duration, isNotFound func(error) bool, fn func() error) error {
	return do(ctx, delay, isNotFound, fn, sleep)
}

// do is Do with the sleep given (a test records the back-off).
func do(ctx context.Context, delay time.Duration, isNotFound func(error) bool, fn func() error,
	sleep func(context.Context, time.Duration) error) error {
	wait := delay
	for miss := 1; ; miss++ {
		err := fn()
		if err == nil || !isNotFound(err) {
			return err
		}
		if miss == Looks {
			return &NotFoundError{Looks: miss, Err: err}
		}
		if cerr := sleep(ctx, wait); cerr != nil {
			return errors.Join(cerr, err)
		}
		wait = min(2*wait, maxFactor*delay)
	}
}

// sleep waits d, or until ctx is done (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
