// Package boot runs the init's boot steps. A step is data: a name, an apply
// function that changes the system, and a verify function that reads the
// change back. Run turns each into a report.Step (applied, skipped with a
// reason, failed with an error) and never stops early: a failed tuning must
// not keep the workload from starting, so a step's failure, and even its
// panic, is recorded and the next step runs.
package boot

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"github.com/hotpath-dev/hotpath/init/report"
)

// Detail collects what a step did, for the report ("channels": "4").
type Detail map[string]string

// Step is one boot step.
type Step struct {
	Name string
	// Apply changes the system. It returns a *SkipError (see Skip) when the
	// step does not apply here, any other error when it failed.
	Apply func(ctx context.Context, d Detail) error
	// Verify reads the result back and returns an error if it does not hold.
	// It may be nil for steps whose apply already reads back.
	Verify func(ctx context.Context, d Detail) error
	// Reapply marks a step whose effect the system can undo after boot
	// behind the init's back (a NIC's device reset brings new interrupt
	// vectors with default affinity, queues with default XPS): the init
	// runs such steps again when that happens.
	Reapply bool
	// Background marks a step the boot does not wait for: the workload
	// starts without it (IPv6 when IPv4 serves, a DHCP retry after the
	// network deadline). The init runs it in its own goroutine, lists it
	// as report.Background, and reports its outcome when it ends.
	Background bool
}

// SkipError marks a step as skipped rather than failed.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return "skipped: " + e.Reason }

// Skip returns an error that makes Run record the step as skipped.
func Skip(format string, args ...any) error {
	return &SkipError{Reason: fmt.Sprintf(format, args...)}
}

// Logger receives one line per finished step.
type Logger func(format string, args ...any)

// Run runs steps in order and returns one result per step, each timed by
// RunOne, and logs each result with log (if not nil).
func Run(ctx context.Context, steps []Step, log Logger) []report.Step {
	out := make([]report.Step, 0, len(steps))
	for _, s := range steps {
		r := RunOne(ctx, s)
		if log != nil {
			switch r.Status {
			case report.Applied:
				log("step %s: applied %v", r.Name, r.Detail)
			case report.Skipped:
				log("step %s: skipped: %s", r.Name, r.Reason)
			case report.Failed:
				log("step %s: FAILED: %s", r.Name, r.Error)
			}
		}
		out = append(out, r)
	}
	return out
}

// Bounds of a step's error or skip reason and of one detail value: they
// often quote what came from outside (a lease, a metadata answer,
// user-data problems), and the report that carries them must fit EC2's
// 64 KiB console window with every other step. A panic's stack fits.
const (
	MaxError  = 4 << 10
	MaxDetail = 1 << 10
)

// bound cuts s to at most max bytes (on a UTF-8 boundary), saying how
// much was left out.
func bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return fmt.Sprintf("%s...(%d more bytes)", s[:end], len(s)-end)
}

// RunOne runs one step: apply, then verify if apply succeeded. Its error,
// skip reason and detail values are bounded (MaxError, MaxDetail).
func RunOne(ctx context.Context, s Step) (r report.Step) {
	start := time.Now()
	d := Detail{}
	r.Name = s.Name
	defer func() {
		if p := recover(); p != nil {
			r.Status = report.Failed
			r.Error = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
		}
		r.Error, r.Reason = bound(r.Error, MaxError), bound(r.Reason, MaxError)
		for k, v := range d {
			d[k] = bound(v, MaxDetail)
		}
		if len(d) > 0 {
			r.Detail = d
		}
		r.Millis = float64(time.Since(start).Microseconds()) / 1000
	}()
	err := s.Apply(ctx, d)
	if err == nil && s.Verify != nil {
		if verr := s.Verify(ctx, d); verr != nil {
			err = fmt.Errorf("verify: %w", verr)
		}
	}
	var skip *SkipError
	switch {
	case err == nil:
		r.Status = report.Applied
	case errors.As(err, &skip):
		r.Status = report.Skipped
		r.Reason = skip.Reason
	default:
		r.Status = report.Failed
		r.Error = err.Error()
	}
	return r
}
