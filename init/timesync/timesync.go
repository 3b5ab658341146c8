// Package timesync keeps the system clock in step with an NTP server,
// Amazon Time Sync (169.254.169.123) by default: the appliance boots with
// whatever the RTC says and has no other time source, and the Date header,
// TLS certificate checks and AWS request signing all need the right time.
//
// The protocol is github.com/beevik/ntp's client (NTPv4, kernel receive
// timestamps, response validation); this package decides what to do with
// the answer: step the clock once when it is far off (more than Threshold,
// typically at boot after a wrong RTC), and otherwise slew it through the
// kernel's PLL (adjtimex ADJ_OFFSET), which also learns the oscillator's
// frequency error so that the clock stays close between queries. Queries
// repeat every Interval in the background; the last state is available to
// the boot report, the event log and a metrics gauge through Status.
package timesync

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/beevik/ntp"
	"github.com/hotpath-dev/hotpath/init/report"
)

// Clock is the system clock as the syncer changes it. System is the real
// one; a test that must not touch its host's clock records the calls.
type Clock interface {
	// Step sets the clock forward by d (backward for a negative d) at once.
	Step(d time.Duration) error
	// Slew hands the offset d to the kernel to correct gradually.
	Slew(d time.Duration) error
}

// Options configure a Syncer.
type Options struct {
	// Server is ip, ip:port or host:port (port 123 when omitted).
	Server string
	// Threshold is the largest offset corrected by slewing; beyond it the
	// clock is stepped. Default 500ms (the kernel PLL's own limit).
	Threshold time.Duration
	// Interval between queries once synced; Retry the first wait after a
	// failure, doubling up to Interval. Defaults 64s and 2s.
	Interval, Retry time.Duration
	// Timeout of one query. Default 1s.
	Timeout time.Duration
	Clock   Clock
	// Event is called on the first sync, on every step, when the server
	// is lost and when it answers again; it may be nil.
	Event func(detail string, st report.TimeSync)
	Log   func(format string, args ...any)
}

// Status is the syncer's state: what a report, an event or a metrics
// gauge (the clock offset) reads.
type Status struct {
	Server string
	// Offset is the last measured offset of the local clock (positive: it
	// was behind the server), before the correction.
	Offset   time.Duration
	RTT      time.Duration
	Stratum  int
	Stepped  bool      // the last correction was a step
	Steps    int       // steps so far (the first sync after a wrong RTC is one)
	LastSync time.Time // zero before the first good answer
	Syncs    int
	Failures int
	Err      error // of the last query; nil after a good one
}

// Report renders s for the boot report and events.
func (s Status) Report() report.TimeSync {
	r := report.TimeSync{Server: s.Server, OffsetMS: ms(s.Offset), RTTMS: ms(s.RTT), Stratum: s.Stratum,
		Stepped: s.Stepped, Steps: s.Steps, Syncs: s.Syncs, Failures: s.Failures}
	if !s.LastSync.IsZero() {
		r.LastSync = s.LastSync.UTC().Format(time.RFC3339Nano)
	}
	if s.Err != nil {
		r.Error = s.Err.Error()
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Syncer keeps the clock in sync with one server.
type Syncer struct {
	opt Options

	mu sync.Mutex
	st Status
}

// New returns a Syncer; opt.Server and opt.Clock are required.
func New(opt Options) *Syncer {
	if opt.Threshold <= 0 {
		opt.Threshold = 500 * time.Millisecond
	}
	if opt.Interval <= 0 {
		opt.Interval = 64 * time.Second
	}
	if opt.Retry <= 0 {
		opt.Retry = 2 * time.Second
	}
	if opt.Timeout <= 0 {
		opt.Timeout = time.Second
	}
	return &Syncer{opt: opt, st: Status{Server: opt.Server}}
}

// Status returns the current state. It is safe to call from any goroutine.
func (s *Syncer) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *Syncer) logf(format string, args ...any) {
	if s.opt.Log != nil {
		s.opt.Log(format, args...)
	}
}

// Sync queries the server once and corrects the clock: a step when the
// offset is beyond Threshold, a slew otherwise. An answer that fails
// validation (kiss-o'-death, unsynchronised server, stale reference) is
// a failure and changes nothing.
func (s *Syncer) Sync(ctx context.Context) (Status, error) {
	prev := s.Status()
	err := s.sync(ctx)
	s.mu.Lock()
	if err != nil {
		s.st.Failures++
		s.st.Err = err
	}
	st := s.st
	s.mu.Unlock()
	switch {
	case err == nil && prev.Syncs == 0:
		s.event(fmt.Sprintf("first sync with %s", s.opt.Server), st)
	case err == nil && st.Stepped:
		s.event("clock stepped", st)
	case err == nil && prev.Err != nil:
		s.event("server answers again", st)
	case err != nil && prev.Err == nil:
		s.event("server lost", st)
	}
	return st, err
}

func (s *Syncer) event(detail string, st Status) {
	if s.opt.Event != nil {
		s.opt.Event(detail, st.Report())
	}
}

func (s *Syncer) sync(ctx context.Context) error {
	timeout := s.opt.Timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return fmt.Errorf("ntp %s: %w", s.opt.Server, context.DeadlineExceeded)
	}
	r, err := ntp.QueryWithOptions(s.opt.Server, ntp.QueryOptions{Timeout: timeout,
		Dialer: func(la, ra string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", ra)
		}})
	if err != nil {
		return fmt.Errorf("ntp %s: %w", s.opt.Server, err)
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("ntp %s: answer not usable: %w", s.opt.Server, err)
	}
	off := r.ClockOffset
	stepped := off > s.opt.Threshold || off < -s.opt.Threshold
	if stepped {
		err = s.opt.Clock.Step(off)
	} else {
		err = s.opt.Clock.Slew(off)
	}
	if err != nil {
		return fmt.Errorf("ntp %s: correct offset %v: %w", s.opt.Server, off, err)
	}
	s.mu.Lock()
	s.st.Offset, s.st.RTT, s.st.Stratum, s.st.Stepped = off, r.RTT, int(r.Stratum), stepped
	s.st.LastSync, s.st.Err = time.Now(), nil
	s.st.Syncs++
	if stepped {
		s.st.Steps++
	}
	s.mu.Unlock()
	return nil
}

// Run syncs until ctx ends: every Interval while the server answers,
// sooner (Retry, doubling) after a failure. The first query is at once,
// unless a Sync already succeeded.
func (s *Syncer) Run(ctx context.Context) {
	wait := time.Duration(0)
	if s.Status().Syncs > 0 {
		wait = s.opt.Interval
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		lost := s.Status().Err == nil
		if _, err := s.Sync(ctx); err != nil {
			if lost || wait < s.opt.Retry {
				wait = s.opt.Retry
			} else {
				wait = min(2*wait, s.opt.Interval)
			}
			// Once per loss: a platform without the server (Amazon Time
			// Sync outside EC2) must not fill the console.
			if lost {
				s.logf("%v (retrying, every %v at most)", err, s.opt.Interval)
			}
			continue
		}
		wait = s.opt.Interval
	}
}
