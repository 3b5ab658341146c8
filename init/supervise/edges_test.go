package supervise

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
)

const edgesHelperEnv = "HOTPATH_SUPERVISE_EDGES"

// TestHelperEdges is not a test: it is the workload of the tests below
// (the test binary re-executed with HOTPATH_SUPERVISE_EDGES). "flaky"
// serves HTTP and answers 503 while the file <mark>.sick exists, 200
// otherwise; "silent" runs without ever listening and exits 0 on SIGTERM.
func TestHelperEdges(t *testing.T) {
	mode := os.Getenv(edgesHelperEnv)
	if mode == "" {
		t.Skip("helper process for the supervisor's edge tests")
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	go func() { <-c; os.Exit(0) }()
	if mode == "silent" {
		select {}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("HOTPATH_PORT"))
	if err != nil {
		os.Exit(11)
	}
	sick := os.Getenv("HOTPATH_MARK") + ".sick"
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(12)
		}
		bufio.NewReader(c).ReadString('\n')
		if _, err := os.Stat(sick); err == nil {
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
		} else {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
		c.Close()
	}
}

func edges(mode string) func(*Config) {
	return func(c *Config) {
		c.Args = []string{"-test.run=^TestHelperEdges$"}
		c.Env = append(c.Env, edgesHelperEnv+"="+mode)
	}
}

// waitState polls the snapshot until ok holds, for up to 5 s.
func waitState(t *testing.T, s *Supervisor, what string, ok func(State) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := s.Snapshot()
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot never %s: %+v", what, st)
		}
	}
}

// TestLivenessRecovers: a workload that fails a few liveness probes (fewer
// than Failures) and then answers again is ready again: the snapshot, which
// the management port's /healthz answers from, goes back to ready, so the
// load balancer sends it traffic again.
func TestLivenessRecovers(t *testing.T) {
	s, _, rec, mark := setup(t, "", func(c *Config) {
		edges("flaky")(c)
		c.Liveness = &Liveness{Path: "/healthz", Interval: 20 * time.Millisecond, Timeout: time.Second, Failures: 1000}
	})
	go s.Run()
	pid := rec.next(t, report.EventReady).PID
	if err := os.WriteFile(mark+".sick", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "not ready while the probe fails", func(st State) bool { return !st.Ready && st.State == StateRunning })
	os.Remove(mark + ".sick")
	waitState(t, s, "ready again once the probe passes", func(st State) bool { return st.Ready && st.State == StateReady })
	if st := s.Snapshot(); st.PID != pid || st.Restarts != 0 {
		t.Errorf("snapshot %+v: the workload was restarted, want pid %d still", st, pid)
	}
}

// TestNoReadyDeadline: ReadyTimeout 0 (ready.timeout=0s) sets no deadline:
// OnFirstReady is called once, with nil, when the workload accepts, however
// long that takes.
func TestNoReadyDeadline(t *testing.T) {
	var mu sync.Mutex
	var calls []error
	s, _, rec, _ := setup(t, "serve", func(c *Config) {
		c.ReadyTimeout = 0
		c.OnFirstReady = func(err error) { mu.Lock(); calls = append(calls, err); mu.Unlock() }
	})
	go s.Run()
	rec.next(t, report.EventReady)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || calls[0] != nil {
		t.Errorf("OnFirstReady calls %v, want one with nil", calls)
	}
}

// TestNotReadyReport: when the deadline passes, the boot report's error
// says what did not happen and what the workload did meanwhile (its exits
// only if it had any), and the snapshot says the process runs, not that it
// is still starting.
func TestNotReadyReport(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		helper     func(*Config)
		// The deadline runs on the wall clock: long enough for the helper
		// to have exited by then on a loaded machine (its restart waits
		// on the fake clock).
		deadline   time.Duration
		has, hasNo string
	}{
		{"never listens", "", edges("silent"), 300 * time.Millisecond, "", "exits"},
		{"exited once", "exit3", nil, 3 * time.Second, " (1 starts, 1 exits, last: exit status 3)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan error, 2)
			s, _, rec, _ := setup(t, tc.mode, func(c *Config) {
				if tc.helper != nil {
					tc.helper(c)
				}
				c.ReadyTimeout = tc.deadline
				c.OnFirstReady = func(err error) { got <- err }
			})
			go s.Run()
			rec.next(t, report.EventStart)
			var err error
			select {
			case err = <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("no OnFirstReady call")
			}
			if err == nil || !strings.HasPrefix(err.Error(), "workload did not accept on 127.0.0.1:") ||
				!strings.Contains(err.Error(), tc.has) || (tc.hasNo != "" && strings.Contains(err.Error(), tc.hasNo)) {
				t.Errorf("OnFirstReady(%v), want the deadline error with %q and without %q", err, tc.has, tc.hasNo)
			}
			if tc.mode == "" {
				if st := s.Snapshot(); st.State != StateRunning || st.Ready {
					t.Errorf("after the deadline, a workload alive but not listening: %+v, want state running", st)
				}
			}
		})
	}
}

// TestFinishGivesUp: a reboot(2) that keeps failing is tried three times,
// a second apart, and then Finish returns the error (PID 1 then stays up
// rather than exit, which would panic the kernel).
func TestFinishGivesUp(t *testing.T) {
	sys := &fakeSystem{fail: 100}
	done := make(chan error, 1)
	go func() { done <- Finish(sys, false, func() int64 { return 0 }, func(report.Event) {}, t.Logf) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Finish still retrying after 15 s")
	}
	sys.mu.Lock()
	defer sys.mu.Unlock()
	if got := strings.Join(sys.calls, ","); got != "killall SIGKILL,sync,power-off,power-off,power-off" || !errors.Is(err, syscall.EPERM) {
		t.Errorf("calls %s, error %v; want 3 power-offs, then EPERM", got, err)
	}
}
