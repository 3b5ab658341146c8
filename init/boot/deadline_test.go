package boot

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
)

// TestBefore: two steps share one deadline; the second, which would wait
// for longer than what is left, fails at the deadline with its own reason,
// and the one after the deadline fails at once.
func TestBefore(t *testing.T) {
	deadline := time.Now().Add(150 * time.Millisecond)
	wait := func(ctx context.Context, _ Detail) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return nil
		}
	}
	quick := Step{Name: "quick", Apply: func(context.Context, Detail) error { return nil }}
	start := time.Now()
	r1 := RunOne(context.Background(), Before(deadline, quick))
	r2 := RunOne(context.Background(), Before(deadline, Step{Name: "slow", Apply: wait}))
	took := time.Since(start)
	r3 := RunOne(context.Background(), Before(deadline, Step{Name: "late", Apply: wait}))
	if r1.Status != report.Applied {
		t.Errorf("quick step: %+v", r1)
	}
	if r2.Status != report.Failed || !strings.Contains(r2.Error, "deadline exceeded") {
		t.Errorf("slow step: %+v, want failed at the deadline", r2)
	}
	if took > 2*time.Second {
		t.Errorf("the slow step ran %v past a 150 ms deadline", took)
	}
	if r3.Status != report.Failed || r3.Millis > 500 {
		t.Errorf("step after the deadline: %+v, want failed at once", r3)
	}
}
