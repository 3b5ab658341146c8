package eventual

import (
	"context"
	"errors"
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

// TestDoBacksOff: the sleeps double from delay and stop at 4×delay.
func TestDoBacksOff(t *testing.T) {
	const delay = 2 * time.Millisecond
	var at []time.Time
	Do(context.Background(), delay, isNF, func() error { at = append(at, time.Now()); return errNF })
	if len(at) != Looks {
		t.Fatalf("%d calls", len(at))
	}
	total := at[len(at)-1].Sub(at[0])
	// 1+2+4+4·6 = 31 delays at least (sleeps are never shorter).
	if min := 31 * delay; total < min {
		t.Errorf("%d misses took %s, want at least %s", Looks, total, min)
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
