package eventual

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

var errNF, errOther = errors.New("NotFound"), errors.New("AccessDenied")

func isNF(err error) bool { return errors.Is(err, errNF) }

// TestDo: misses below the bound are retried to the answer that follows
// them; the bound itself fails with NotFoundError, naming the last miss;
// any other error is returned at once.
func TestDo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		misses  int   // answers NotFound first
		then    error // then this
		calls   int
		want    error
		timeout bool // a *NotFoundError
	}{
		{"at once", 0, nil, 1, nil, false},
		{"one miss", 1, nil, 2, nil, false},
		{"Looks-1 misses", Looks - 1, nil, Looks, nil, false},
		{"Looks misses", Looks, nil, Looks, errNF, true},
		{"other error after a miss", 1, errOther, 2, errOther, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := Do(context.Background(), time.Microsecond, isNF, func() error {
				calls++
				if calls <= tc.misses {
					return errNF
				}
				return tc.then
			})
			var nf *NotFoundError
			if calls != tc.calls || !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) || errors.As(err, &nf) != tc.timeout {
				t.Errorf("%d calls, err %v; want %d calls, err %v (NotFoundError %t)", calls, err, tc.calls, tc.want, tc.timeout)
			}
		})
	}
}

// TestDoBacksOff: the sleeps between the Looks calls double from delay
// and stop at 4×delay; a cancelled context ends the wait with its error.
func TestDoBacksOff(t *testing.T) {
	const d = time.Second
	var slept []time.Duration
	rec := func(_ context.Context, w time.Duration) error { slept = append(slept, w); return nil }
	do(context.Background(), d, isNF, func() error { return errNF }, rec)
	want := []time.Duration{d, 2 * d, 4 * d, 4 * d, 4 * d, 4 * d, 4 * d, 4 * d, 4 * d}
	if !slices.Equal(slept, want) {
		t.Errorf("slept %v, want %v", slept, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := Do(ctx, time.Hour, isNF, func() error { calls++; return errNF })
	if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, errNF) {
		t.Errorf("cancelled: %d calls, err %v", calls, err)
	}
}

// TestRetryable: the waiter wrapper retries NotFound up to the bound and
// hands everything else to the waiter's own decision.
func TestRetryable(t *testing.T) {
	next := func(_ context.Context, _ *int, _ *int, err error) (bool, error) { return err == nil, err }
	r := Retryable(isNF, next)
	for i := 1; i < Looks; i++ {
		if retry, err := r(context.Background(), nil, nil, errNF); !retry || err != nil {
			t.Fatalf("miss %d: retry %t, err %v", i, retry, err)
		}
	}
	var nf *NotFoundError
	if retry, err := r(context.Background(), nil, nil, errNF); retry || !errors.As(err, &nf) || !errors.Is(err, errNF) {
		t.Errorf("miss %d: retry %t, err %v; want a NotFoundError", Looks, retry, err)
	}
	if retry, err := Retryable(isNF, next)(context.Background(), nil, nil, errOther); retry || err != errOther {
		t.Errorf("other error: retry %t, err %v", retry, err)
	}
}
