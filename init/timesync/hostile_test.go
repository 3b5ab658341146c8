package timesync_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/timesync"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

type vmNTP = vm.NTPServer

// fakeClock is the system clock as the syncer sees it, without touching
// the host's: its time is the host's plus every step (and slew) asked
// for, plus what the test advances, so that a step shows in the next
// offset as on a real machine.
type fakeClock struct {
	mu          sync.Mutex
	adj         time.Duration
	steps, slew []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.adj)
}

func (c *fakeClock) Step(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adj += d
	c.steps = append(c.steps, d)
	return nil
}

func (c *fakeClock) Slew(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adj += d // as if the PLL had finished
	c.slew = append(c.slew, d)
	return nil
}

// Advance moves the clock on without a correction (time passing).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.adj += d
	c.mu.Unlock()
}

func (c *fakeClock) Steps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.steps...)
}

const year = 365 * 24 * time.Hour

func syncer(addr string, clk *fakeClock, events *[]string) *timesync.Syncer {
	return timesync.New(timesync.Options{Server: addr, Clock: clk, Now: clk.Now, ConfirmGap: time.Millisecond,
		Interval: time.Minute, Timeout: 500 * time.Millisecond,
		Event: func(d string, st report.TimeSync) {
			if events != nil {
				*events = append(*events, d)
			}
		}})
}

// TestSingleAnswerDoesNotStep: one answer a year off among right ones
// (the first, or any of the confirming samples) steps nothing, and the
// refusal is reported; a year off that every sample confirms is a step.
func TestSingleAnswerDoesNotStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  func(n int) time.Duration
		step bool
	}{
		{"only the first answer a year off", func(n int) time.Duration { return map[bool]time.Duration{true: year}[n == 0] }, false},
		{"the last confirming answer right", func(n int) time.Duration { return map[bool]time.Duration{true: year}[n < 2] }, false},
		{"alternating", func(n int) time.Duration { return time.Duration((n+1)%2) * year }, false},
		{"confirmed", func(int) time.Duration { return year }, true},
		{"confirmed, small", func(int) time.Duration { return -3 * time.Second }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := server(t, 0)
			srv.Configure(func(s *vm.NTPServer) { s.OffsetOf = tc.off })
			clk := &fakeClock{}
			var events []string
			s := syncer(srv.Addr(), clk, &events)
			st, err := s.Sync(context.Background())
			steps := clk.Steps()
			if !tc.step {
				var refused *timesync.StepRefusedError
				if !errors.As(err, &refused) || len(steps) != 0 || st.Refused != 1 || st.Report().Refused != 1 {
					t.Fatalf("err %v, steps %v, status %+v: want the step refused and reported", err, steps, st)
				}
				if len(events) != 1 || events[0] != "step refused" {
					t.Errorf("events %q", events)
				}
				return
			}
			if err != nil || len(steps) != 1 || !near(steps[0], tc.off(0), 50*time.Millisecond) || srv.Answers() != 3 {
				t.Fatalf("err %v, steps %v after %d answers: want one confirmed step of %v", err, steps, srv.Answers(), tc.off(0))
			}
		})
	}
}

// TestLaterStepBounded: once synced (after a confirmed step), answers
// that jump back and forth are refused every time and never step; a
// small confirmed step is still made.
func TestLaterStepBounded(t *testing.T) {
	srv := server(t, 0)
	var offset atomic.Int64
	offset.Store(int64(time.Hour))
	srv.Configure(func(s *vm.NTPServer) { s.OffsetOf = func(int) time.Duration { return time.Duration(offset.Load()) } })
	clk := &fakeClock{}
	var events []string
	s := syncer(srv.Addr(), clk, &events)
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil || len(clk.Steps()) != 1 {
		t.Fatalf("first sync: %v, steps %v", err, clk.Steps())
	}
	for i, o := range []time.Duration{0, time.Hour, 0, time.Hour} {
		offset.Store(int64(o))
		st, err := s.Sync(ctx)
		var refused *timesync.StepRefusedError
		if o == 0 && (!errors.As(err, &refused) || st.Refused != (i/2)+1) {
			t.Errorf("sync %d (server back by an hour): err %v, status %+v: want refused", i, err, st)
		}
		if o == time.Hour && err != nil {
			t.Errorf("sync %d (server agrees again): %v", i, err)
		}
	}
	if steps := clk.Steps(); len(steps) != 1 {
		t.Errorf("steps %v: want only the first", steps)
	}
	offset.Store(int64(time.Hour + 3*time.Second))
	if _, err := s.Sync(ctx); err != nil || len(clk.Steps()) != 2 || !near(clk.Steps()[1], 3*time.Second, 50*time.Millisecond) {
		t.Errorf("a 3 s step within MaxStep: %v, steps %v", err, clk.Steps())
	}
	if strings.Count(strings.Join(events, ","), "step refused") != 2 {
		t.Errorf("events %q: want 'step refused' once per run of refusals", events)
	}
}

// TestKissOfDeath: DENY and RSTR stop the queries to that server (Sync
// and Run send nothing more); RATE backs off, doubling, and a query is
// sent again once the back-off has passed.
func TestKissOfDeath(t *testing.T) {
	for _, code := range []string{"DENY", "RSTR"} {
		t.Run(code, func(t *testing.T) {
			srv := server(t, time.Hour)
			srv.Configure(func(s *vm.NTPServer) { s.Stratum, s.Kiss = 0, code })
			clk := &fakeClock{}
			var events []string
			s := syncer(srv.Addr(), clk, &events)
			var kiss *timesync.KissError
			if _, err := s.Sync(context.Background()); !errors.As(err, &kiss) || kiss.Code != code {
				t.Fatalf("err %v", err)
			}
			for range 3 {
				s.Sync(context.Background())
			}
			done := make(chan struct{})
			go func() { s.Run(context.Background()); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Run goes on after a DENY")
			}
			st := s.Status()
			if srv.Answers() != 1 || st.Kiss != code || st.Report().Kiss != code || len(clk.Steps())+len(clk.slew) != 0 {
				t.Errorf("%d queries answered, status %+v: want one, then none", srv.Answers(), st)
			}
			if len(events) != 1 || !strings.Contains(events[0], code) {
				t.Errorf("events %q", events)
			}
		})
	}
	t.Run("RATE", func(t *testing.T) {
		srv := server(t, 0)
		srv.Configure(func(s *vm.NTPServer) { s.Stratum = 0 }) // RATE
		clk := &fakeClock{}
		s := syncer(srv.Addr(), clk, nil)
		ctx := context.Background()
		st, _ := s.Sync(ctx)
		first := st.NextQuery.Sub(clk.Now())
		if srv.Answers() != 1 || first < 59*time.Second {
			t.Fatalf("after RATE: %d answers, next query in %v: want at least the interval", srv.Answers(), first)
		}
		if _, err := s.Sync(ctx); !errors.Is(err, timesync.ErrRateLimited) || srv.Answers() != 1 {
			t.Fatalf("during the back-off: %v, %d answers: want no query", err, srv.Answers())
		}
		clk.Advance(first + time.Second)
		st, _ = s.Sync(ctx)
		if srv.Answers() != 2 {
			t.Fatalf("after the back-off: %d answers, want a query", srv.Answers())
		}
		if second := st.NextQuery.Sub(clk.Now()); second < 2*first-time.Second {
			t.Errorf("second back-off %v after %v: want it doubled", second, first)
		}
		srv.Configure(func(s *vm.NTPServer) { s.Stratum = 1 })
		clk.Advance(10 * time.Minute)
		if st, err := s.Sync(ctx); err != nil || st.Kiss != "" || !st.NextQuery.IsZero() {
			t.Errorf("server answering again: %v, %+v", err, st)
		}
	})
}

// TestSampleChecks: an answer that is not a usable sample corrects
// nothing. The library refuses some of them itself (zero transmit time,
// origin mismatch, leap 3, stratum 16); a root distance between
// MaxDistance and the library's 16 s is refused here.
func TestSampleChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*vmNTP)
		want string
	}{
		{"leap 3", func(s *vmNTP) { s.Leap = 3 }, "leap"},
		{"stratum 16", func(s *vmNTP) { s.Stratum = 16 }, "stratum"},
		{"zero transmit", func(s *vmNTP) { s.Mangle = func(b []byte) { clear(b[40:48]) } }, "transmit"},
		{"origin mismatch", func(s *vmNTP) { s.Mangle = func(b []byte) { b[31] ^= 1 } }, "didn't match request"},
		{"root distance 2s", func(s *vmNTP) { s.RootDispersion = 2 * time.Second }, "root distance"},
		{"odd kiss code", func(s *vmNTP) { s.Stratum, s.Kiss = 0, "\x1b[2J" }, `"0x1b5b324a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := server(t, 5*time.Second)
			srv.Configure(tc.set)
			clk := &fakeClock{}
			s := syncer(srv.Addr(), clk, nil)
			_, err := s.Sync(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one naming %q", err, tc.want)
			}
			if len(clk.Steps())+len(clk.slew) != 0 {
				t.Errorf("the clock was corrected: %v %v", clk.Steps(), clk.slew)
			}
		})
	}
}
