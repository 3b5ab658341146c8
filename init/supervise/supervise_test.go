package supervise

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

const helperEnv = "HOTPATH_SUPERVISE_HELPER"

// TestHelperWorkload is not a test: it is the workload the supervisor
// tests start (the test binary re-executed with HOTPATH_SUPERVISE_HELPER).
func TestHelperWorkload(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process for the supervisor tests")
	}
	mark := os.Getenv("HOTPATH_MARK")
	switch mode {
	case "exit3":
		os.Exit(3)
	case "orphan":
		// Start a grandchild that outlives us, then exit: the grandchild
		// is reparented to the subreaper (the test process) and must be
		// reaped by the supervisor's reaper when it exits.
		pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0], "-test.run=^TestHelperWorkload$"},
			&syscall.ProcAttr{Env: []string{helperEnv + "=sleep"}, Sys: &syscall.SysProcAttr{Setsid: true}})
		if err != nil {
			os.Exit(10)
		}
		os.WriteFile(mark, []byte(strconv.Itoa(pid)), 0o644)
		os.Exit(0)
	case "sleep":
		time.Sleep(300 * time.Millisecond)
		os.Exit(0)
	case "serve", "stubborn":
		if mode == "stubborn" {
			signal.Ignore(syscall.SIGTERM)
			// Marked before listening: readiness implies the mark.
			os.WriteFile(mark, []byte("ignoring"), 0o644)
		} else {
			c := make(chan os.Signal, 1)
			signal.Notify(c, syscall.SIGTERM)
			go func() {
				<-c
				os.WriteFile(mark, []byte("sigterm"), 0o644)
				os.Exit(0)
			}()
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("HOTPATH_PORT"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(11)
		}
		var hung atomic.Bool
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(12)
			}
			go func() {
				if hung.Load() {
					select {} // accepted by the kernel, never answered
				}
				line, _ := bufio.NewReader(c).ReadString('\n')
				line = strings.TrimSpace(line)
				if n, ok := strings.CutPrefix(line, "exit "); ok {
					code, _ := strconv.Atoi(n)
					os.Exit(code)
				}
				switch {
				case line == "hang":
					hung.Store(true)
				case strings.HasPrefix(line, "GET /healthz "):
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				case strings.HasPrefix(line, "GET "):
					io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
				}
				c.Close()
			}()
		}
	}
	os.Exit(99)
}

// fakeClock is a manual clock: After registers a timer that fires when
// Advance passes its deadline; every After call is announced on timers.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	added  chan time.Duration
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1000, 0), added: make(chan time.Duration, 100)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	c := make(chan time.Time, 1)
	f.timers = append(f.timers, fakeTimer{f.now.Add(d), c})
	f.mu.Unlock()
	f.added <- d
	return c
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			t.c <- f.now
		} else {
			kept = append(kept, t)
		}
	}
	f.timers = kept
}

// waitTimer waits (in real time) for the supervisor to start a timer.
func (f *fakeClock) waitTimer(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-f.added:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no timer started")
		return 0
	}
}

// recorder collects events and log lines.
type recorder struct {
	mu     sync.Mutex
	events []report.Event
	logs   []string
	ch     chan report.Event
}

func newRecorder() *recorder { return &recorder{ch: make(chan report.Event, 1000)} }

func (r *recorder) event(e report.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	r.ch <- e
}

func (r *recorder) logf(format string, args ...any) {
	r.mu.Lock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// next waits for the next event of kind.
func (r *recorder) next(t *testing.T, kind string) report.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-r.ch:
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func setup(t *testing.T, mode string, mutate func(*Config)) (*Supervisor, *fakeClock, *recorder, string) {
	t.Helper()
	clk := newFakeClock()
	rec := newRecorder()
	mark := filepath.Join(t.TempDir(), "mark")
	port := freePort(t)
	cfg := Config{
		Path: os.Args[0],
		Args: []string{"-test.run=^TestHelperWorkload$"},
		Env:  []string{helperEnv + "=" + mode, "HOTPATH_MARK=" + mark, "HOTPATH_PORT=" + strconv.Itoa(port)},
		Port: port,
		Policy: Policy{
			BackoffMin:      100 * time.Millisecond,
			BackoffMax:      800 * time.Millisecond,
			CrashLoopExits:  3,
			CrashLoopWindow: 10 * time.Second,
			Grace:           5 * time.Second,
		},
		ReadyTimeout: 20 * time.Second,
		Stderr:       os.Stderr,
		Clock:        clk,
		Event:        rec.event,
		Log:          rec.logf,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go s.Reap(ctx)
	t.Cleanup(func() {
		s.Stop("test end")
		// Let a pending grace timer fire so Run can end.
		for i := 0; i < 100; i++ {
			select {
			case <-s.Done():
				cancel()
				return
			case <-time.After(50 * time.Millisecond):
				clk.Advance(time.Hour)
			}
		}
		cancel()
	})
	return s, clk, rec, mark
}

func TestRestartBackoffCrashLoop(t *testing.T) {
	s, clk, rec, _ := setup(t, "exit3", nil)
	go s.Run()
	want := []time.Duration{100, 200, 400, 800, 800, 800}
	for i, w := range want {
		st := rec.next(t, report.EventStart)
		ex := rec.next(t, report.EventExit)
		if ex.PID != st.PID || ex.Detail != "exit status 3" {
			t.Errorf("exit %d: %+v after start %+v", i, ex, st)
		}
		if i+1 >= 3 { // the third exit within the window is a crash loop
			cl := rec.next(t, report.EventCrashLoop)
			if cl.Exits != i+1 {
				t.Errorf("crash-loop exits %d, want %d", cl.Exits, i+1)
			}
		}
		rs := rec.next(t, report.EventRestart)
		d := clk.waitTimer(t)
		if d != w*time.Millisecond || rs.BackoffMS != int64(w) {
			t.Errorf("restart %d: back-off %v (event %d ms), want %v ms", i, d, rs.BackoffMS, w)
		}
		rec.mu.Lock()
		for _, e := range rec.events {
			if e.Kind == report.EventCrashLoop && i+1 < 3 {
				t.Errorf("crash loop reported after %d exits", i+1)
			}
		}
		rec.mu.Unlock()
		clk.Advance(d)
	}
	rec.mu.Lock()
	logs := strings.Join(rec.logs, "\n")
	rec.mu.Unlock()
	if !strings.Contains(logs, "CRASH LOOP") {
		t.Errorf("no crash-loop log line:\n%s", logs)
	}
	if st := s.Snapshot(); !st.CrashLoop || st.Starts < len(want) || st.Restarts != st.Starts-1 {
		t.Errorf("snapshot in a crash loop: %+v", st)
	}
}

// TestRestartServesAgainAndBackoffResets: exits spread wider than the window are no crash
// loop, and a run longer than the window resets the back-off.
func TestRestartServesAgainAndBackoffResets(t *testing.T) {
	var readyErr []error
	var mu sync.Mutex
	s, clk, rec, _ := setup(t, "serve", func(c *Config) {
		c.CrashLoopExits = 2
		c.OnFirstReady = func(err error) { mu.Lock(); readyErr = append(readyErr, err); mu.Unlock() }
	})
	go s.Run()
	exitVia := func(code int) {
		t.Helper()
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.Port))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "exit %d\n", code)
		c.Close()
	}
	for round := 0; round < 3; round++ {
		rec.next(t, report.EventStart)
		rec.next(t, report.EventReady)
		clk.Advance(11 * time.Second) // ran longer than the window
		exitVia(7)
		if ex := rec.next(t, report.EventExit); ex.Detail != "exit status 7" {
			t.Errorf("exit: %+v", ex)
		}
		rs := rec.next(t, report.EventRestart)
		if d := clk.waitTimer(t); d != 100*time.Millisecond || rs.BackoffMS != 100 {
			t.Errorf("round %d: back-off %v, want the minimum after a long run", round, d)
		}
		clk.Advance(100 * time.Millisecond)
	}
	rec.mu.Lock()
	for _, e := range rec.events {
		if e.Kind == report.EventCrashLoop {
			t.Errorf("crash loop reported for exits %v apart: %+v", 11*time.Second, e)
		}
	}
	rec.mu.Unlock()
	mu.Lock()
	if len(readyErr) != 1 || readyErr[0] != nil {
		t.Errorf("OnFirstReady calls: %v, want one with nil", readyErr)
	}
	mu.Unlock()
}

// TestBackoffKeepsDoublingWithinWindow: a run longer than the back-off
// but shorter than the crash-loop window is no fresh start: the back-off
// keeps doubling (only a run as long as the window resets it).
func TestBackoffKeepsDoublingWithinWindow(t *testing.T) {
	s, clk, rec, _ := setup(t, "serve", func(c *Config) { c.CrashLoopExits = 100 })
	go s.Run()
	for round, want := range []time.Duration{100, 200, 400, 800} {
		rec.next(t, report.EventStart)
		rec.next(t, report.EventReady)
		clk.Advance(time.Second) // longer than every back-off, shorter than the 10 s window
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.Port))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "exit 7\n")
		c.Close()
		rec.next(t, report.EventExit)
		rs := rec.next(t, report.EventRestart)
		if d := clk.waitTimer(t); d != want*time.Millisecond || rs.BackoffMS != int64(want) {
			t.Errorf("round %d: back-off %v (event %d ms), want %d ms after a 1 s run within the window", round, d, rs.BackoffMS, want)
		}
		clk.Advance(want * time.Millisecond)
	}
}

func TestShutdownGraceful(t *testing.T) {
	s, clk, rec, mark := setup(t, "serve", nil)
	go s.Run()
	rec.next(t, report.EventReady)
	s.Stop("power button")
	if sd := rec.next(t, report.EventShutdown); sd.Detail != "power button" {
		t.Errorf("shutdown event %+v", sd)
	}
	if d := clk.waitTimer(t); d != 5*time.Second {
		t.Errorf("grace timer %v, want 5s", d)
	}
	ex := rec.next(t, report.EventExit)
	if ex.Detail != "exit status 0" {
		t.Errorf("exit after SIGTERM: %+v", ex)
	}
	<-s.Done()
	if s.Killed() {
		t.Error("SIGKILL sent to a workload that exited on SIGTERM")
	}
	if b, _ := os.ReadFile(mark); string(b) != "sigterm" {
		t.Errorf("workload did not see SIGTERM (mark %q)", b)
	}
}

// fakeSystem records the end of a shutdown instead of doing it.
type fakeSystem struct {
	mu    sync.Mutex
	calls []string
	fail  int
}

func (f *fakeSystem) add(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fakeSystem) KillAll(sig unix.Signal) error {
	f.add("killall " + unix.SignalName(sig))
	return nil
}
func (f *fakeSystem) Sync() { f.add("sync") }
func (f *fakeSystem) Reboot(cmd int) error {
	switch cmd {
	case unix.LINUX_REBOOT_CMD_POWER_OFF:
		f.add("power-off")
	case unix.LINUX_REBOOT_CMD_RESTART:
		f.add("restart")
	case unix.LINUX_REBOOT_CMD_HALT:
		f.add("HALT")
	}
	if f.fail > 0 {
		f.fail--
		return unix.EPERM
	}
	return nil
}

// TestShutdownSequence: a workload that ignores SIGTERM gets SIGKILL
// exactly when the grace period has passed; then sync, then power off.
func TestShutdownSequence(t *testing.T) {
	s, clk, rec, mark := setup(t, "stubborn", nil)
	go s.Run()
	st := rec.next(t, report.EventStart)
	rec.next(t, report.EventReady)
	if b, _ := os.ReadFile(mark); string(b) != "ignoring" {
		t.Fatalf("helper not ready to ignore SIGTERM: %q", b)
	}
	s.Stop("SIGTERM to PID 1")
	rec.next(t, report.EventShutdown)
	if d := clk.waitTimer(t); d != 5*time.Second {
		t.Fatalf("grace timer %v", d)
	}
	// Before the grace period ends the workload must still be alive.
	clk.Advance(4 * time.Second)
	time.Sleep(200 * time.Millisecond)
	if err := unix.Kill(st.PID, 0); err != nil {
		t.Fatalf("workload gone before the grace period ended: %v", err)
	}
	select {
	case <-s.Done():
		t.Fatal("Run returned before the grace period ended")
	default:
	}
	clk.Advance(time.Second)
	ex := rec.next(t, report.EventExit)
	if ex.Detail != "signal: killed" {
		t.Errorf("exit %+v, want killed", ex)
	}
	<-s.Done()
	if !s.Killed() {
		t.Error("Killed() = false")
	}
	sys := &fakeSystem{fail: 1}
	var evs []report.Event
	err := Finish(sys, false, func() int64 { return 42 }, func(e report.Event) { evs = append(evs, e) }, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sys.calls, ","); got != "killall SIGKILL,sync,power-off,power-off" {
		t.Errorf("system calls %s, want killall, sync, power-off (retried once)", got)
	}
	if len(evs) != 1 || evs[0].Kind != report.EventPowerOff || evs[0].Detail != "power-off" {
		t.Errorf("events %+v", evs)
	}
	sys = &fakeSystem{}
	Finish(sys, true, func() int64 { return 0 }, func(report.Event) {}, t.Logf)
	if got := strings.Join(sys.calls, ","); got != "killall SIGKILL,sync,restart" {
		t.Errorf("reboot sequence %s", got)
	}
}

func TestReapsOrphans(t *testing.T) {
	// Stand in for PID 1: orphans of our descendants come to us.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	s, clk, rec, mark := setup(t, "orphan", nil)
	go s.Run()
	rec.next(t, report.EventExit)
	clk.waitTimer(t) // restart back-off: hold it so no second orphan starts
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	orphan, _ := strconv.Atoi(string(b))
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec.mu.Lock()
		logs := strings.Join(rec.logs, "\n")
		rec.mu.Unlock()
		if strings.Contains(logs, fmt.Sprintf("reaped orphan pid %d (exit status 0)", orphan)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d not reaped; logs:\n%s", orphan, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Reaped means gone, not a zombie.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", orphan)); err == nil {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", orphan)); strings.Contains(string(st), ") Z ") {
			t.Errorf("orphan %d is a zombie", orphan)
		}
	}
}

func TestStartFailure(t *testing.T) {
	var got error
	s, clk, rec, _ := setup(t, "exit3", func(c *Config) {
		c.Path = "/nonexistent/workload"
		c.OnFirstReady = func(err error) { got = err }
	})
	go s.Run()
	rec.next(t, report.EventRestart)
	clk.waitTimer(t)
	if got == nil || !strings.Contains(got.Error(), "/nonexistent/workload") {
		t.Errorf("OnFirstReady(%v), want the start error", got)
	}
}

// TestCrashLoopOneReport: a workload that exits at every start gets exactly
// one OnFirstReady call, at the one deadline counted from the first start,
// however many times it restarts meanwhile.
func TestCrashLoopOneReport(t *testing.T) {
	// The deadline must leave room for several starts and exits: on a
	// loaded machine one start of the helper took over a second. So it is
	// ten times what one start and exit takes here, now, and at least 1 s.
	t0 := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorkload$")
	cmd.Env = []string{helperEnv + "=exit3"}
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("helper exit3: %v", err)
	}
	timeout := max(time.Second, 10*time.Since(t0))
	var mu sync.Mutex
	var calls []error
	var at []time.Time
	s, _, rec, _ := setup(t, "exit3", func(c *Config) {
		c.Clock = RealClock
		c.BackoffMin, c.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
		c.ReadyTimeout = timeout
		c.OnFirstReady = func(err error) {
			mu.Lock()
			calls = append(calls, err)
			at = append(at, time.Now())
			mu.Unlock()
		}
	})
	begin := time.Now()
	go s.Run()
	// The report is waited for, not slept for (a loaded machine may start
	// the workload late); a per-start deadline would never fire in a
	// crash loop, so this wait would fail. Then two more deadlines' worth
	// of restarts: a second report would show there.
	for deadline := time.Now().Add(timeout + 20*time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no OnFirstReady call within 20 s of a crash loop")
		}
	}
	time.Sleep(2 * timeout)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 {
		t.Fatalf("OnFirstReady called %d times in a crash loop, want exactly once: %v", len(calls), calls)
	}
	if calls[0] == nil || !strings.Contains(calls[0].Error(), "exit status 3") {
		t.Errorf("OnFirstReady(%v), want the deadline error naming the last exit", calls[0])
	}
	if d := at[0].Sub(begin); d < timeout {
		t.Errorf("report after %v, before the %v deadline", d, timeout)
	}
	st := s.Snapshot()
	if st.Restarts < 3 || st.Exits < 3 || st.Ready {
		t.Errorf("snapshot %+v, want several restarts and exits, not ready", st)
	}
	if st.State != StateCrashLoop && st.State != StateStarting {
		t.Errorf("state %q in a crash loop", st.State)
	}
	rec.mu.Lock()
	n := 0
	for _, e := range rec.events {
		if e.Kind == report.EventStart {
			n++
		}
	}
	rec.mu.Unlock()
	if n < 3 {
		t.Errorf("%d starts within %v, want a crash loop", n, 3*timeout)
	}
}

// TestSnapshot follows the state through start, ready, exit and restart.
func TestSnapshot(t *testing.T) {
	s, clk, rec, _ := setup(t, "serve", nil)
	if st := s.Snapshot(); st.State != StateDown || st.PID != 0 {
		t.Errorf("before Run: %+v", st)
	}
	go s.Run()
	ev := rec.next(t, report.EventReady)
	st := s.Snapshot()
	if st.State != StateReady || !st.Ready || st.PID != ev.PID || st.Restarts != 0 || st.Started != clk.Now() {
		t.Errorf("ready: %+v, want ready pid %d, no restarts", st, ev.PID)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "exit 4\n")
	c.Close()
	rec.next(t, report.EventRestart)
	if st := s.Snapshot(); st.State != StateDown || st.Ready || st.PID != 0 || st.Exits != 1 {
		t.Errorf("after exit: %+v", st)
	}
	clk.Advance(clk.waitTimer(t))
	ev = rec.next(t, report.EventReady)
	if st := s.Snapshot(); st.State != StateReady || st.Restarts != 1 || st.Starts != 2 || st.PID != ev.PID || st.Stopping {
		t.Errorf("after restart: %+v", st)
	}
	s.Stop("test")
	if st := s.Snapshot(); !st.Stopping {
		t.Errorf("Stop called, snapshot %+v", st)
	}
	<-s.Done()
}

// TestLivenessRestartsHungWorkload: a workload whose port still completes
// the TCP handshake (the kernel's backlog) but that no longer answers is
// killed after Failures probes and restarted; a healthy one never is.
func TestLivenessRestartsHungWorkload(t *testing.T) {
	s, clk, rec, _ := setup(t, "serve", func(c *Config) {
		c.Liveness = &Liveness{Path: "/healthz", Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond, Failures: 3}
	})
	go s.Run()
	first := rec.next(t, report.EventReady)
	time.Sleep(500 * time.Millisecond) // ~10 probes of a healthy workload
	rec.mu.Lock()
	for _, e := range rec.events {
		if e.Kind == report.EventUnresponsive || e.Kind == report.EventExit {
			t.Errorf("healthy workload: %+v", e)
		}
	}
	rec.mu.Unlock()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "hang\n")
	c.Close()
	// Between the first failed probe and the kill, the snapshot (what
	// /healthz answers from) says the process runs but is not ready.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		st := s.Snapshot()
		if st.PID == first.PID && !st.Ready && st.State == StateRunning {
			break
		}
		if st.PID != first.PID || time.Now().After(deadline) {
			t.Fatalf("snapshot of the hung workload never showed it not ready: %+v", st)
		}
	}
	un := rec.next(t, report.EventUnresponsive)
	if un.PID != first.PID || !strings.Contains(un.Detail, "3 liveness probes failed") {
		t.Errorf("unresponsive event %+v", un)
	}
	if ex := rec.next(t, report.EventExit); ex.PID != first.PID || ex.Detail != "signal: killed" {
		t.Errorf("exit %+v, want pid %d killed", ex, first.PID)
	}
	rec.next(t, report.EventRestart) // the exit is counted before the restart is scheduled
	if st := s.Snapshot(); st.Unresponsive != 1 || st.Exits != 1 {
		t.Errorf("after the kill: %+v, want 1 unresponsive, 1 exit", st)
	}
	clk.Advance(clk.waitTimer(t))
	if again := rec.next(t, report.EventReady); again.PID == first.PID {
		t.Errorf("not restarted: %+v", again)
	}
}

// TestLivenessHTTPStatus: a 5xx answer is a failed probe, a TCP probe only
// needs the connect.
func TestLivenessHTTPStatus(t *testing.T) {
	s, _, rec, _ := setup(t, "serve", func(c *Config) {
		c.Liveness = &Liveness{Path: "/broken", Interval: 20 * time.Millisecond, Timeout: time.Second, Failures: 2}
	})
	go s.Run()
	un := rec.next(t, report.EventUnresponsive)
	if !strings.Contains(un.Detail, "status 503") {
		t.Errorf("unresponsive %+v, want the 503", un)
	}
	s2, _, rec2, _ := setup(t, "serve", func(c *Config) {
		c.Liveness = &Liveness{Interval: 20 * time.Millisecond, Timeout: time.Second, Failures: 1}
	})
	go s2.Run()
	rec2.next(t, report.EventReady)
	time.Sleep(300 * time.Millisecond)
	if st := s2.Snapshot(); st.State != StateReady || st.Restarts != 0 {
		t.Errorf("tcp liveness on a serving workload: %+v", st)
	}
}
