// Package timesync keeps the system clock in step with an NTP server,
// Amazon Time Sync (169.254.169.123) by default: the appliance boots with
// whatever the RTC says and has no other time source, and the Date header,
// TLS certificate checks and AWS request signing all need the right time.
//
// The protocol is github.com/beevik/ntp's client (NTPv4, a random
// transmit timestamp matched against the answer's origin, response
// validation); this package decides what to do with the answer: step the
// clock when it is far off (more than Threshold, typically at boot after a
// wrong RTC), and otherwise slew it through the kernel's PLL (adjtimex
// ADJ_OFFSET), which also learns the oscillator's frequency error so that
// the clock stays close between queries. Queries repeat every Interval in
// the background; the last state is available to the boot report, the
// event log and a metrics gauge through Status.
//
// The server is on the other side of a network, so its answers are not
// taken on trust (RFC 5905's checks, and what ntpd and chrony do):
//
//   - an answer becomes a sample only through parseSample (leap indicator
//     3, stratum 0 or 16, a stale reference, a root distance beyond
//     MaxDistance are refused; the library refuses a zero transmit time and
//     an origin timestamp that is not ours);
//   - a step needs Confirm samples that agree within Threshold (one answer a
//     year off, or answers that alternate, step nothing);
//   - after the first sync the clock is kept within microseconds, so a step
//     beyond MaxStep is refused and reported, never made;
//   - a kiss-o'-death DENY or RSTR stops the queries to that server for
//     good; RATE backs off (at least Interval, doubling up to MaxPoll).
//
// A server that lies consistently from the first answer cannot be told
// from a right one by a client with one server: that needs a second
// source, which Amazon Time Sync (the default) does not need on EC2.
package timesync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
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
	// Now is the clock the queries are timed with and the back-off is
	// measured on; nil is time.Now. A test gives the time of its fake
	// Clock, so that a step it records shows in the next offset.
	Now func() time.Time
	// Confirm is how many samples, Threshold apart at most, a step needs
	// (the first and Confirm-1 more, ConfirmGap apart); defaults 3 and
	// 100ms.
	Confirm    int
	ConfirmGap time.Duration
	// MaxStep bounds a step after the first sync; beyond it a step is
	// refused and reported. Default 10s: more than a VM pause or a
	// mishandled leap second explains, less than anything that moves
	// certificate or token validity.
	MaxStep time.Duration
	// MaxDistance bounds a sample's root distance; default MaxDistance.
	MaxDistance time.Duration
	// MaxPoll bounds the back-off after RATE; default 2^17 s (RFC 5905's
	// MAXPOLL, 36 h).
	MaxPoll time.Duration
	// Event is called on the first sync, on every step, when the server
	// is lost and when it answers again, when a step is refused and on a
	// kiss-o'-death; it may be nil.
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
	// Refused counts the steps refused (not confirmed, or beyond MaxStep).
	Refused int
	// Kiss is the code of the last kiss-o'-death ("DENY": no more
	// queries); NextQuery is the earliest next query after a RATE.
	Kiss      string
	NextQuery time.Time
	Err       error // of the last query; nil after a good one
}

// Report renders s for the boot report and events.
func (s Status) Report() report.TimeSync {
	r := report.TimeSync{Server: s.Server, OffsetMS: ms(s.Offset), RTTMS: ms(s.RTT), Stratum: s.Stratum,
		Stepped: s.Stepped, Steps: s.Steps, Syncs: s.Syncs, Failures: s.Failures, Refused: s.Refused, Kiss: s.Kiss}
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

	mu   sync.Mutex
	st   Status
	rate time.Duration // the back-off after the last RATE; 0 after a good answer
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
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Confirm <= 0 {
		opt.Confirm = 3
	}
	if opt.ConfirmGap <= 0 {
		opt.ConfirmGap = 100 * time.Millisecond
	}
	if opt.MaxStep <= 0 {
		opt.MaxStep = 10 * time.Second
	}
	if opt.MaxDistance <= 0 {
		opt.MaxDistance = MaxDistance
	}
	if opt.MaxPoll <= 0 {
		opt.MaxPoll = (1 << 17) * time.Second
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

// Sync queries the server and corrects the clock: a step when the offset
// is beyond Threshold and confirmed (and, after the first sync, within
// MaxStep), a slew otherwise. An answer that fails validation
// (kiss-o'-death, unsynchronised server, stale reference, too distant) is
// a failure and changes nothing; so is a refused step. After DENY or
// RSTR, or during a RATE back-off, Sync sends nothing and fails at once.
func (s *Syncer) Sync(ctx context.Context) (Status, error) {
	prev := s.Status()
	err := s.sync(ctx)
	s.mu.Lock()
	var kiss *KissError
	var refused *StepRefusedError
	if errors.As(err, &kiss) {
		s.st.Kiss = kiss.Code
		if kiss.Code == "RATE" {
			s.rate = min(max(2*s.rate, s.opt.Interval), s.opt.MaxPoll)
			s.st.NextQuery = s.opt.Now().Add(s.rate)
		}
	}
	if errors.As(err, &refused) {
		s.st.Refused++
	}
	if err != nil && !errors.Is(err, ErrRateLimited) {
		s.st.Failures++
		s.st.Err = err
	}
	st := s.st
	s.mu.Unlock()
	var prevKiss *KissError
	var prevRefused *StepRefusedError
	switch {
	case kiss != nil && !errors.As(prev.Err, &prevKiss):
		s.event("kiss-o'-death "+strconv.Quote(kiss.Code), st)
	case refused != nil && !errors.As(prev.Err, &prevRefused):
		s.event("step refused", st)
	case err == nil && prev.Syncs == 0:
		s.event(fmt.Sprintf("first sync with %s", s.opt.Server), st)
	case err == nil && st.Stepped:
		s.event("clock stepped", st)
	case err == nil && prev.Err != nil:
		s.event("server answers again", st)
	case err != nil && prev.Err == nil && kiss == nil && refused == nil:
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
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	if st.Kiss == "DENY" || st.Kiss == "RSTR" {
		return &KissError{Server: s.opt.Server, Code: st.Kiss}
	}
	if now := s.opt.Now(); now.Before(st.NextQuery) {
		return fmt.Errorf("ntp %s: %w: next query in %v", s.opt.Server, ErrRateLimited, st.NextQuery.Sub(now).Round(time.Second))
	}
	smp, err := s.query(ctx)
	if err != nil {
		return err
	}
	off := smp.offset
	stepped := off.Abs() > s.opt.Threshold
	if stepped {
		if st.Syncs > 0 && off.Abs() > s.opt.MaxStep {
			return &StepRefusedError{Server: s.opt.Server, Offset: off,
				Why: fmt.Sprintf("beyond %v after the first sync", s.opt.MaxStep)}
		}
		if smp, err = s.confirm(ctx, smp); err != nil {
			return err
		}
		off = smp.offset
		err = s.opt.Clock.Step(off)
	} else {
		err = s.opt.Clock.Slew(off)
	}
	if err != nil {
		return fmt.Errorf("ntp %s: correct offset %v: %w", s.opt.Server, off, err)
	}
	s.mu.Lock()
	s.st.Offset, s.st.RTT, s.st.Stratum, s.st.Stepped = off, smp.rtt, smp.stratum, stepped
	s.st.LastSync, s.st.Err, s.st.Kiss, s.st.NextQuery = s.opt.Now(), nil, "", time.Time{}
	s.rate = 0
	s.st.Syncs++
	if stepped {
		s.st.Steps++
	}
	s.mu.Unlock()
	return nil
}

// query asks the server once and returns the answer as a checked sample.
func (s *Syncer) query(ctx context.Context) (sample, error) {
	timeout := s.opt.Timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return sample{}, fmt.Errorf("ntp %s: %w", s.opt.Server, context.DeadlineExceeded)
	}
	r, err := ntp.QueryWithOptions(s.opt.Server, ntp.QueryOptions{Timeout: timeout, GetSystemTime: s.opt.Now,
		Dialer: func(la, ra string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", ra)
		}})
	if err != nil {
		return sample{}, fmt.Errorf("ntp %s: %w", s.opt.Server, err)
	}
	return parseSample(s.opt.Server, r, s.opt.MaxDistance)
}

// confirm takes Confirm-1 more samples after first, ConfirmGap apart, and
// returns the one with the shortest round trip (the least delayed, as
// RFC 5905's clock filter chooses) when all agree with first within
// Threshold; otherwise the step is refused (a kiss-o'-death or a failed
// query ends the confirmation with its error).
func (s *Syncer) confirm(ctx context.Context, first sample) (sample, error) {
	best := first
	for i := 2; i <= s.opt.Confirm; i++ {
		select {
		case <-ctx.Done():
			return sample{}, fmt.Errorf("ntp %s: confirming a step of %v: %w", s.opt.Server, first.offset, ctx.Err())
		case <-time.After(s.opt.ConfirmGap):
		}
		smp, err := s.query(ctx)
		if err != nil {
			return sample{}, fmt.Errorf("confirming a step of %v: %w", first.offset, err)
		}
		if (smp.offset - first.offset).Abs() > s.opt.Threshold {
			return sample{}, &StepRefusedError{Server: s.opt.Server, Offset: first.offset,
				Why: fmt.Sprintf("not confirmed: sample %d of %d says %v", i, s.opt.Confirm, smp.offset)}
		}
		if smp.rtt < best.rtt {
			best = smp
		}
	}
	return best, nil
}

// Run syncs until ctx ends: every Interval while the server answers,
// sooner (Retry, doubling) after a failure, later after a RATE
// kiss-o'-death (NextQuery). It returns after a DENY or RSTR. The first
// query is at once, unless a Sync already succeeded.
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
		st, err := s.Sync(ctx)
		var kiss *KissError
		if errors.As(err, &kiss) && kiss.Stop() {
			s.logf("%v", err)
			return
		}
		if err != nil {
			if lost || wait < s.opt.Retry {
				wait = s.opt.Retry
			} else {
				wait = min(2*wait, s.opt.Interval)
			}
			if d := st.NextQuery.Sub(s.opt.Now()); d > wait {
				wait = d // RATE
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
