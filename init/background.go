package main

import (
	"fmt"
	"slices"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

// bootClock is CLOCK_BOOTTIME in milliseconds with microseconds: the
// timeline's clock, the one ready_ms and the events use.
func bootClock() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return -1
	}
	return float64(ts.Nano()/1e3) / 1e3
}

// now is the machine's clock (bootClock unless a test set one).
func (m *machine) now() float64 {
	if m.clock != nil {
		return m.clock()
	}
	return bootClock()
}

// openTimeline puts the phases before the first step on the timeline:
// the kernel's (its start to the init's) and the init's own (to its
// first step at first). Called with m.mu held.
func (m *machine) openTimeline(first float64) {
	if len(m.timeline) > 0 || m.initMillis <= 0 {
		return
	}
	m.timeline = append(m.timeline,
		report.Phase{Name: report.PhaseKernel, Start: 0, End: m.initMillis},
		report.Phase{Name: report.PhaseInit, Start: m.initMillis, End: first})
}

// background starts s in its own goroutine: the boot does not wait for
// it. The report lists it now as report.Background and its phase as
// open (End -1); when it ends, its outcome is logged like any step's,
// printed in an EventStepDone line with its phase, and handed to the
// metrics (which then show its final status); done, if not nil, gets it.
func (m *machine) background(s boot.Step, done func(report.Step)) report.Step {
	start := m.now()
	r := report.Step{Name: s.Name, Status: report.Background,
		Detail: map[string]string{"outcome": "later, in a " + report.EventStepDone + " event"}}
	m.mu.Lock()
	m.openTimeline(start)
	m.results = append(m.results, r)
	i := len(m.timeline)
	m.timeline = append(m.timeline, report.Phase{Name: report.StepPhase(s.Name), Start: start, End: -1, Background: true})
	m.mu.Unlock()
	m.con.Logf("step %s: in the background", s.Name)
	m.obs.step(r)
	go func() {
		defer recoverLog(m.con, "background step "+s.Name)
		res := boot.RunOne(m.ctx, s)
		end := m.now()
		logStep(m.con, res)
		m.mu.Lock()
		m.timeline[i].End = end
		ph := m.timeline[i]
		m.mu.Unlock()
		m.obs.stepDone(res)
		m.con.Line(report.EventPrefix, report.Event{Kind: report.EventStepDone, Millis: int64(end),
			Detail: fmt.Sprintf("%s %s after %.0f ms in the background", res.Name, res.Status, end-start),
			Steps:  []report.Step{res}, Phase: &ph})
		if done != nil {
			done(res)
		}
	}()
	return r
}

// timelineNow is a copy of the timeline as it stands, for the metrics.
func (m *machine) timelineNow() []report.Phase {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.timeline)
}

// resultsNow is a copy of the steps' outcomes as they stand.
func (m *machine) resultsNow() []report.Step {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.results)
}
