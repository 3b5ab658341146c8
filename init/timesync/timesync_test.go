package timesync_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/timesync"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// recorder stands in for CLOCK_REALTIME, which a unit test must not change
// on its host; it records the corrections asked for. The QEMU test
// (tests/e2e TestIMDS) checks the real clock of a guest booted in 2020.
type recorder struct {
	mu          sync.Mutex
	steps, slew []time.Duration
}

func (r *recorder) Step(d time.Duration) error {
	r.mu.Lock()
	r.steps = append(r.steps, d)
	r.mu.Unlock()
	return nil
}

func (r *recorder) Slew(d time.Duration) error {
	r.mu.Lock()
	r.slew = append(r.slew, d)
	r.mu.Unlock()
	return nil
}

func server(t *testing.T, offset time.Duration) *vm.NTPServer {
	t.Helper()
	s, err := vm.ListenNTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Configure(func(s *vm.NTPServer) { s.Offset = offset })
	t.Cleanup(func() { s.Close() })
	return s
}

func near(got, want, tol time.Duration) bool { return (got - want).Abs() <= tol }

func TestStepAndSlew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		step   bool
	}{
		{"far ahead: step", 3 * time.Second, true},
		{"years behind: step", -6 * 365 * 24 * time.Hour, true},
		{"close: slew", 120 * time.Millisecond, false},
		{"close behind: slew", -80 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := server(t, tc.offset)
			clk := &recorder{}
			var events []string
			s := timesync.New(timesync.Options{Server: srv.Addr(), Clock: clk,
				Event: func(d string, st report.TimeSync) { events = append(events, d) }})
			st, err := s.Sync(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !near(st.Offset, tc.offset, 50*time.Millisecond) {
				t.Errorf("offset %v, want ~%v", st.Offset, tc.offset)
			}
			got := clk.slew
			if tc.step {
				got = clk.steps
			}
			if len(got) != 1 || len(clk.steps)+len(clk.slew) != 1 || !near(got[0], tc.offset, 50*time.Millisecond) {
				t.Errorf("steps %v slews %v, want one %s of ~%v", clk.steps, clk.slew, map[bool]string{true: "step", false: "slew"}[tc.step], tc.offset)
			}
			if st.Stepped != tc.step || (st.Steps == 1) != tc.step || st.Syncs != 1 || st.Stratum != 1 || st.LastSync.IsZero() || st.Err != nil {
				t.Errorf("status %+v", st)
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "first sync") {
				t.Errorf("events %q, want the first sync", events)
			}
			r := st.Report()
			if r.Server != srv.Addr() || r.LastSync == "" || r.Syncs != 1 {
				t.Errorf("report %+v", r)
			}
		})
	}
}

func TestUnusableAnswers(t *testing.T) {
	t.Run("kiss of death", func(t *testing.T) {
		srv := server(t, time.Hour)
		srv.Configure(func(s *vm.NTPServer) { s.Stratum = 0 })
		clk := &recorder{}
		s := timesync.New(timesync.Options{Server: srv.Addr(), Clock: clk})
		if _, err := s.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "kiss-o'-death") {
			t.Fatalf("err %v", err)
		}
		if len(clk.steps)+len(clk.slew) != 0 {
			t.Errorf("a kiss-o'-death changed the clock: %v %v", clk.steps, clk.slew)
		}
	})
	t.Run("no server", func(t *testing.T) {
		srv := server(t, 0)
		addr := srv.Addr()
		srv.Close()
		var events []string
		s := timesync.New(timesync.Options{Server: addr, Clock: &recorder{}, Timeout: 200 * time.Millisecond,
			Event: func(d string, st report.TimeSync) { events = append(events, d) }})
		for range 2 {
			s.Sync(context.Background())
		}
		st := s.Status()
		if st.Failures != 2 || st.Err == nil || st.Syncs != 0 || st.Report().Error == "" {
			t.Errorf("status %+v", st)
		}
		if len(events) != 1 || events[0] != "server lost" {
			t.Errorf("events %q: want one 'server lost'", events)
		}
	})
}

// TestRunRecovers: the background loop retries a lost server sooner than
// its interval and reports its return.
func TestRunRecovers(t *testing.T) {
	srv := server(t, 10*time.Millisecond)
	addr := srv.Addr()
	srv.Close()
	evc := make(chan string, 16)
	s := timesync.New(timesync.Options{Server: addr, Clock: &recorder{}, Timeout: 100 * time.Millisecond,
		Retry: 20 * time.Millisecond, Interval: time.Hour,
		Event: func(d string, st report.TimeSync) { evc <- d }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	if d := <-evc; d != "server lost" {
		t.Fatalf("event %q", d)
	}
	back, err := vm.ListenNTP(addr)
	if err != nil {
		t.Skipf("port %s taken again: %v", addr, err)
	}
	defer back.Close()
	select {
	case d := <-evc:
		if !strings.HasPrefix(d, "first sync") {
			t.Errorf("event %q, want the first sync", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no sync after the server came back")
	}
}
