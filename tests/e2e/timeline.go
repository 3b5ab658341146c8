package e2e

import (
	"fmt"
	"math"
	"strings"

	"github.com/hotpath-dev/hotpath/init/report"
)

// timelineSlack is what rounding may put between phases that follow one
// another: the events' times are whole milliseconds, the steps'
// microseconds.
const timelineSlack = 1.0

// CheckTimeline checks the report's boot timeline: every phase present,
// in order. The phases on the way to ready are the kernel's (from 0), the
// init's, one per step in the report's order, the workload's exec and
// ready (ending at ready_ms), each starting where or after the one before
// ended; a background step has a background phase, which ends after it
// starts or not yet (-1).
func CheckTimeline(r *report.Report) []error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	if len(r.Timeline) == 0 {
		return []error{fmt.Errorf("no boot timeline in the report")}
	}
	var fg []report.Phase
	var stepPhases []string
	for _, p := range r.Timeline {
		if name, ok := strings.CutPrefix(p.Name, "step "); ok {
			stepPhases = append(stepPhases, name)
		}
		if p.Background {
			if p.End != -1 && p.End < p.Start {
				bad("background phase %q ends at %.1f ms before it starts at %.1f ms", p.Name, p.End, p.Start)
			}
			continue
		}
		fg = append(fg, p)
	}
	// One phase per step, in the report's order, background where the
	// step is.
	var steps []string
	for _, s := range r.Steps {
		steps = append(steps, s.Name)
	}
	if strings.Join(stepPhases, "\n") != strings.Join(steps, "\n") {
		bad("timeline steps %q, want the report's steps in order %q", stepPhases, steps)
	}
	for _, p := range r.Timeline {
		if name, ok := strings.CutPrefix(p.Name, "step "); ok {
			if s, found := r.Step(name); found && (s.Status == report.Background) != p.Background {
				bad("step %s is %s but its phase has background=%v", name, s.Status, p.Background)
			}
		}
	}
	want := func(i int, name string) {
		if i < 0 || i >= len(fg) || fg[i].Name != name {
			got := "nothing"
			if i >= 0 && i < len(fg) {
				got = fg[i].Name
			}
			bad("timeline phase %d is %s, want %s", i, got, name)
		}
	}
	want(0, report.PhaseKernel)
	want(1, report.PhaseInit)
	want(len(fg)-2, report.PhaseExec)
	want(len(fg)-1, report.PhaseReady)
	if len(fg) > 0 && fg[0].Start != 0 {
		bad("kernel phase starts at %.1f ms, want 0 (kernel start)", fg[0].Start)
	}
	for i, p := range fg {
		if p.End < p.Start {
			bad("phase %q ends at %.1f ms before it starts at %.1f ms", p.Name, p.End, p.Start)
		}
		if i > 0 && p.Start < fg[i-1].End-timelineSlack {
			bad("phase %q starts at %.1f ms, before %q ended at %.1f ms: out of order", p.Name, p.Start, fg[i-1].Name, fg[i-1].End)
		}
	}
	if n := len(fg); n > 0 && fg[n-1].Name == report.PhaseReady && math.Abs(fg[n-1].End-float64(r.ReadyMillis)) > timelineSlack {
		bad("ready phase ends at %.1f ms, the report's ready_ms is %d", fg[n-1].End, r.ReadyMillis)
	}
	return errs
}

// TimelineSummary is the timeline in one line for a test log: the
// kernel's and the init's phases, the steps together and the slowest
// three, the workload's exec and ready, and the background steps.
func TimelineSummary(r *report.Report) string {
	var b strings.Builder
	var steps float64
	type span struct {
		name string
		ms   float64
	}
	var slow []span
	for _, p := range r.Timeline {
		d := p.End - p.Start
		switch name, isStep := strings.CutPrefix(p.Name, "step "); {
		case p.Background:
			if p.End < 0 {
				fmt.Fprintf(&b, "%s: background from %.0f; ", name, p.Start)
			} else {
				fmt.Fprintf(&b, "%s: background %.0f-%.0f; ", name, p.Start, p.End)
			}
		case isStep:
			steps += d
			slow = append(slow, span{name, d})
		default:
			fmt.Fprintf(&b, "%s %.0f; ", p.Name, d)
		}
	}
	for i := 1; i < len(slow); i++ { // insertion sort, slowest first
		for j := i; j > 0 && slow[j].ms > slow[j-1].ms; j-- {
			slow[j], slow[j-1] = slow[j-1], slow[j]
		}
	}
	fmt.Fprintf(&b, "steps %.0f (", steps)
	for i := 0; i < len(slow) && i < 3; i++ {
		fmt.Fprintf(&b, "%s %.0f ", slow[i].name, slow[i].ms)
	}
	return strings.TrimSpace(b.String()) + ") ms"
}
