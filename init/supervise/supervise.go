// Package supervise runs the workload as PID 2 and keeps it running: it
// reaps every child (PID 1 inherits all orphans), restarts the workload
// with exponential back-off when it exits, reports a crash loop (N exits
// within a window) instead of hiding it, and shuts down in order: SIGTERM,
// a grace period, SIGKILL, sync, power off.
//
// Time is injected (Clock) so tests drive back-off, crash-loop windows and
// the grace period without sleeping; the final sync and reboot(2) are
// injected (System) so tests run the whole shutdown sequence without
// powering the machine off.
package supervise

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/init/config"

	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

// Clock is the time source for back-off, crash-loop windows and the grace
// period.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// Policy is the restart and shutdown policy: back-off bounds, what makes
// a crash loop, the grace period (config.Supervise, the supervise.* keys).
type Policy = config.Supervise

// Config configures a Supervisor.
type Config struct {
	Path string
	Args []string // argv[1:]
	Env  []string // the whole environment, HOTPATH_CPUS and HOTPATH_PORT included
	Port int      // readiness: the workload accepts TCP on 127.0.0.1:Port

	// Policy is the back-off, crash-loop and shutdown settings, the init
	// configuration's own type (config.Supervise: the supervise.* keys).
	Policy
	// ReadyTimeout is one deadline counted from the first start, not per
	// start: a workload that crashes at start would otherwise restart its
	// own deadline forever and the boot report would never be printed.
	ReadyTimeout  time.Duration
	ProbeInterval time.Duration // default 10ms
	// Liveness, when set, probes the workload after it became ready and
	// kills it (the supervisor then restarts it) when it stops answering.
	Liveness *Liveness

	// Privileges of the workload (cred.go); nil: root.
	Privileges *Privileges

	// Stdout and Stderr of the workload (the console); nil: /dev/null.
	Stdout, Stderr *os.File

	Clock Clock
	// Millis returns the event timestamp (CLOCK_BOOTTIME ms in the init).
	Millis func() int64
	// Event receives every event line; Log every log line. Both may be nil.
	Event func(report.Event)
	Log   func(format string, args ...any)
	// OnFirstReady is called exactly once: when the workload first accepts
	// (err nil), when ReadyTimeout after the first start passes without
	// that (err set), whatever the workload does meanwhile (a crash loop
	// included), or at once if the first start fails. The init prints the
	// boot report from it.
	OnFirstReady func(err error)
}

// Liveness configures the periodic probe of a ready workload: an HTTP GET
// of Path (any status below 500 is an answer), or a TCP connect when Path
// is empty, every Interval, each bounded by Timeout. Failures consecutive
// failed probes make the workload unresponsive: an event, then SIGKILL to
// its process group (a hung process cannot drain, and SIGTERM could be
// ignored by the very loop that hangs); the supervisor restarts it with
// the usual back-off.
type Liveness struct {
	Path     string
	Interval time.Duration
	Timeout  time.Duration
	Failures int
}

// Workload states of a Snapshot.
const (
	StateStarting  = "starting"   // started, not accepting yet
	StateReady     = "ready"      // accepted on the port (and answers the liveness probe)
	StateRunning   = "running"    // alive, but not accepting (ready deadline passed, or probe failing)
	StateDown      = "down"       // no process: before the first start, between restarts, after shutdown
	StateCrashLoop = "crash-loop" // down, and exits within the window made a crash loop
)

// State is a snapshot of the supervised workload, for a metrics or health
// endpoint. It is the supervisor's own view, so it includes what the
// liveness probe found (Ready false, State running), which no event line
// carries.
type State struct {
	State    string
	PID      int
	Starts   int       // processes started
	Restarts int       // starts after the first
	Started  time.Time // of the current (or last) process, from Clock
	Ready    bool      // the current process accepts connections (and answers the liveness probe)
	Exits    int       // exits in total
	// Unresponsive counts the processes the liveness probe had killed.
	Unresponsive int
	CrashLoop    bool // a crash loop was reported and no process has been ready since
	Stopping     bool // Stop was called: the workload is being (or has been) shut down
}

// Supervisor supervises one workload.
type Supervisor struct {
	cfg Config

	mu      sync.Mutex
	pid     int                          // the running workload, 0 if none
	waiting map[int]chan unix.WaitStatus // exit channels of our children

	st       State  // guarded by mu
	lastExit string // guarded by mu

	stop      chan string
	stopOnce  sync.Once
	done      chan struct{}
	firstOnce sync.Once
	deadline  *time.Timer
	killed    bool
}

// Snapshot returns the workload's current state. It is safe to call from
// any goroutine at any time and costs one uncontended lock.
func (s *Supervisor) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if st.State == "" {
		st.State = StateDown
	}
	return st
}

func (s *Supervisor) setState(f func(st *State)) {
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}

// setStateOf is setState for the probes of process pid: a probe that
// races with its process's exit must not mark the next one.
func (s *Supervisor) setStateOf(pid int, state string, ready bool) {
	s.mu.Lock()
	if s.st.PID == pid {
		s.st.State, s.st.Ready = state, ready
		if ready {
			s.st.CrashLoop = false
		}
	}
	s.mu.Unlock()
}

// New returns a Supervisor. Start the reaper with Reap before Run.
func New(cfg Config) *Supervisor {
	if cfg.Clock == nil {
		cfg.Clock = RealClock
	}
	if cfg.Millis == nil {
		cfg.Millis = func() int64 { return time.Now().UnixMilli() }
	}
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = 10 * time.Millisecond
	}
	if cfg.CrashLoopExits == 0 {
		cfg.CrashLoopExits = 5
	}
	return &Supervisor{
		cfg:     cfg,
		waiting: map[int]chan unix.WaitStatus{},
		stop:    make(chan string, 1),
		done:    make(chan struct{}),
	}
}

func (s *Supervisor) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		s.cfg.Log(format, args...)
	}
}

func (s *Supervisor) event(e report.Event) {
	e.Millis = s.cfg.Millis()
	if s.cfg.Event != nil {
		s.cfg.Event(e)
	}
}

// Reap reaps every child of this process until ctx ends: on SIGCHLD, and
// once a second in case a signal was coalesced. The workload's exit status
// goes to Run; any other child is an orphan inherited by PID 1 (or by a
// subreaper) and is only logged. os/exec must not be used to wait for
// children of this process while Reap runs: wait4(-1) takes them all.
func (s *Supervisor) Reap(ctx context.Context) {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.reapAll()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-tick.C:
		}
	}
}

func (s *Supervisor) reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		s.mu.Lock()
		c, ok := s.waiting[pid]
		delete(s.waiting, pid)
		s.mu.Unlock()
		if ok {
			c <- ws
		} else {
			s.logf("reaped orphan pid %d (%s)", pid, describe(ws))
		}
	}
}

func describe(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		return "signal: " + ws.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// start forks the workload in its own process group (so that shutdown
// signals reach whatever it started too). The pid is registered for the
// reaper before the reaper can see its exit: the lock is held across the
// fork.
func (s *Supervisor) start() (int, chan unix.WaitStatus, error) {
	stdin := s.cfg.Stdout
	// The workload reads nothing; /dev/null is opened per start and closed
	// once the child has its copy (keeping an *os.File only by its number
	// would let its finalizer close the descriptor under us).
	if null, err := os.Open(os.DevNull); err == nil {
		defer null.Close()
		stdin = null
	}
	files := []uintptr{fd(stdin), fd(s.cfg.Stdout), fd(s.cfg.Stderr)}
	argv := append([]string{s.cfg.Path}, s.cfg.Args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, err := syscall.ForkExec(s.cfg.Path, argv, &syscall.ProcAttr{
		Dir:   "/",
		Env:   s.cfg.Env,
		Files: files,
		Sys:   s.cfg.Privileges.SysProcAttr(),
	})
	if err != nil {
		return 0, nil, fmt.Errorf("start %s: %w", s.cfg.Path, err)
	}
	c := make(chan unix.WaitStatus, 1)
	s.waiting[pid] = c
	s.pid = pid
	if s.st.Starts > 0 {
		s.st.Restarts++
	}
	s.st.Starts++
	s.st.State, s.st.PID, s.st.Ready, s.st.Started = StateStarting, pid, false, s.cfg.Clock.Now()
	return pid, c, nil
}

// fd is f's descriptor for the child, or none (the child sees it closed).
func fd(f *os.File) uintptr {
	if f == nil {
		return ^uintptr(0) // syscall.ForkExec closes a -1 slot in the child
	}
	return f.Fd()
}

// Stop asks Run to shut the workload down (SIGTERM, grace, SIGKILL) and
// return. It does not wait; see Done.
func (s *Supervisor) Stop(reason string) {
	s.stopOnce.Do(func() {
		// Marked at once: a load balancer's health check fails from the
		// moment shutdown is asked, not once the workload has gone.
		s.setState(func(st *State) { st.Stopping = true })
		s.stop <- reason
	})
}

// Done is closed when Run has returned.
func (s *Supervisor) Done() <-chan struct{} { return s.done }

// Killed reports whether the last shutdown needed SIGKILL.
func (s *Supervisor) Killed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

// Run starts the workload and restarts it until Stop.
func (s *Supervisor) Run() {
	defer close(s.done)
	defer s.setState(func(st *State) { st.State, st.PID, st.Ready = StateDown, 0, false })
	backoff := s.cfg.BackoffMin
	var exits []time.Time
	for first := true; ; first = false {
		select {
		case reason := <-s.stop:
			s.event(report.Event{Kind: report.EventShutdown, Detail: reason})
			return
		default:
		}
		started := s.cfg.Clock.Now()
		pid, exited, err := s.start()
		if first {
			s.armDeadline()
		}
		var status string
		if err != nil {
			status = err.Error()
			s.logf("%v", err)
			if first {
				s.firstReady(err)
			}
		} else {
			s.event(report.Event{Kind: report.EventStart, PID: pid})
			s.logf("workload %s started, pid %d", s.cfg.Path, pid)
			probeCtx, cancel := context.WithCancel(context.Background())
			go s.probe(probeCtx, pid)
			select {
			case ws := <-exited:
				cancel()
				status = describe(ws)
				// What the workload started dies with it: a child left
				// behind would hold its port, CPU and memory against the
				// next start (whose listen would fail with EADDRINUSE).
				unix.Kill(-pid, unix.SIGKILL)
			case reason := <-s.stop:
				cancel()
				s.shutdown(pid, exited, reason)
				return
			}
			s.mu.Lock()
			s.pid = 0
			s.mu.Unlock()
			s.event(report.Event{Kind: report.EventExit, PID: pid, Detail: status})
			s.logf("workload pid %d exited: %s", pid, status)
		}
		now := s.cfg.Clock.Now()
		if now.Sub(started) >= s.cfg.CrashLoopWindow {
			backoff = s.cfg.BackoffMin // it ran long enough: a fresh failure
		}
		exits = append(exits, now)
		for len(exits) > 0 && now.Sub(exits[0]) > s.cfg.CrashLoopWindow {
			exits = exits[1:]
		}
		crashLoop := len(exits) >= s.cfg.CrashLoopExits
		s.setState(func(st *State) {
			st.State, st.PID, st.Ready = StateDown, 0, false
			if crashLoop {
				st.State, st.CrashLoop = StateCrashLoop, true
			}
			st.Exits++
		})
		s.mu.Lock()
		s.lastExit = status
		s.mu.Unlock()
		if crashLoop {
			s.event(report.Event{Kind: report.EventCrashLoop, Exits: len(exits), Detail: status})
			s.logf("CRASH LOOP: workload exited %d times within %v (last: %s); still restarting every %v",
				len(exits), s.cfg.CrashLoopWindow, status, backoff)
		}
		s.event(report.Event{Kind: report.EventRestart, BackoffMS: backoff.Milliseconds()})
		select {
		case <-s.cfg.Clock.After(backoff):
		case reason := <-s.stop:
			s.event(report.Event{Kind: report.EventShutdown, Detail: reason})
			return
		}
		backoff = min(2*backoff, s.cfg.BackoffMax)
	}
}

// armDeadline starts the one readiness deadline, at the first start. It
// runs on the wall clock, like the probe, and is independent of restarts.
func (s *Supervisor) armDeadline() {
	if s.cfg.ReadyTimeout <= 0 {
		return
	}
	t := time.AfterFunc(s.cfg.ReadyTimeout, func() { s.firstReady(s.notReady()) })
	s.mu.Lock()
	s.deadline = t
	s.mu.Unlock()
}

// notReady is the error of a workload that did not accept by the deadline,
// with what it did meanwhile.
func (s *Supervisor) notReady() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.State == StateStarting {
		s.st.State = StateRunning
	}
	err := fmt.Sprintf("workload did not accept on 127.0.0.1:%d within %v of its first start", s.cfg.Port, s.cfg.ReadyTimeout)
	if s.st.Exits > 0 {
		err += fmt.Sprintf(" (%d starts, %d exits, last: %s)", s.st.Starts, s.st.Exits, s.lastExit)
	}
	return errors.New(err)
}

// shutdown sends SIGTERM to the workload's process group, waits up to the
// grace period for the workload to exit, then sends SIGKILL.
func (s *Supervisor) shutdown(pid int, exited chan unix.WaitStatus, reason string) {
	s.event(report.Event{Kind: report.EventShutdown, PID: pid, Detail: reason})
	s.logf("shutdown (%s): SIGTERM to workload pid %d, grace %v", reason, pid, s.cfg.Grace)
	signalGroup(pid, unix.SIGTERM)
	var status string
	select {
	case ws := <-exited:
		status = describe(ws)
	case <-s.cfg.Clock.After(s.cfg.Grace):
		s.logf("workload pid %d still running after %v: SIGKILL", pid, s.cfg.Grace)
		s.mu.Lock()
		s.killed = true
		s.mu.Unlock()
		signalGroup(pid, unix.SIGKILL)
		select {
		case ws := <-exited:
			status = describe(ws)
		case <-time.After(10 * time.Second): // real time: SIGKILL cannot be refused
			status = "did not exit after SIGKILL"
		}
	}
	// Anything else left in the group gets SIGKILL too.
	unix.Kill(-pid, unix.SIGKILL)
	s.event(report.Event{Kind: report.EventExit, PID: pid, Detail: status})
	s.logf("workload pid %d exited: %s", pid, status)
}

func signalGroup(pid int, sig unix.Signal) {
	if err := unix.Kill(-pid, sig); err != nil {
		unix.Kill(pid, sig)
	}
}

// probe polls 127.0.0.1:Port until it accepts a connection, then runs the
// liveness probe if one is configured. It ends when ctx does (the process
// exited).
func (s *Supervisor) probe(ctx context.Context, pid int) {
	defer func() {
		if p := recover(); p != nil {
			s.logf("readiness probe panic: %v", p)
		}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cfg.Port))
	for ctx.Err() == nil {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			c.Close()
			s.setStateOf(pid, StateReady, true)
			s.event(report.Event{Kind: report.EventReady, PID: pid})
			s.logf("workload pid %d accepts on %s", pid, addr)
			s.firstReady(nil)
			if s.cfg.Liveness != nil {
				s.live(ctx, pid, addr)
			}
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.cfg.ProbeInterval):
		}
	}
}

// live probes a ready workload every Liveness.Interval and kills it after
// Liveness.Failures consecutive failures.
func (s *Supervisor) live(ctx context.Context, pid int, addr string) {
	l := s.cfg.Liveness
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.Interval):
		}
		err := s.check(ctx, addr)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if fails > 0 {
				s.logf("workload pid %d answers the liveness probe again", pid)
				s.setStateOf(pid, StateReady, true)
			}
			fails = 0
			continue
		}
		fails++
		s.logf("workload pid %d: liveness probe %d/%d failed: %v", pid, fails, l.Failures, err)
		s.setStateOf(pid, StateRunning, false)
		if fails >= l.Failures {
			s.setState(func(st *State) { st.Unresponsive++ })
			s.event(report.Event{Kind: report.EventUnresponsive, PID: pid,
				Detail: fmt.Sprintf("%d liveness probes failed, last: %v; SIGKILL", fails, err)})
			signalGroup(pid, unix.SIGKILL)
			return
		}
	}
}

// check is one liveness probe: a TCP connect, or an HTTP/1.1 GET of
// Liveness.Path whose status line must come back with a status below 500.
func (s *Supervisor) check(ctx context.Context, addr string) error {
	l := s.cfg.Liveness
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if l.Path == "" {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", l.Path, addr); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("GET %s: %w", l.Path, err)
	}
	var proto string
	var code int
	if _, err := fmt.Sscanf(line, "%s %d", &proto, &code); err != nil || !strings.HasPrefix(proto, "HTTP/") {
		return fmt.Errorf("GET %s: bad status line %q", l.Path, strings.TrimSpace(line))
	}
	if code >= 500 {
		return fmt.Errorf("GET %s: status %d", l.Path, code)
	}
	return nil
}

func (s *Supervisor) firstReady(err error) {
	s.firstOnce.Do(func() {
		s.mu.Lock()
		if s.deadline != nil {
			s.deadline.Stop()
		}
		s.mu.Unlock()
		if s.cfg.OnFirstReady != nil {
			s.cfg.OnFirstReady(err)
		}
	})
}

// System is what the end of a shutdown needs from the kernel.
type System interface {
	KillAll(sig unix.Signal) error // kill(-1, sig): every process but PID 1
	Sync()
	Reboot(cmd int) error
}

// Kernel is the real System.
type Kernel struct{}

func (Kernel) KillAll(sig unix.Signal) error { return unix.Kill(-1, sig) }
func (Kernel) Sync()                         { unix.Sync() }
func (Kernel) Reboot(cmd int) error          { return unix.Reboot(cmd) }

// Finish ends the machine after Run returned: SIGKILL to every remaining
// process, sync, then power off (or restart when reboot is set). It never
// halts: a halted EC2 instance keeps running and billing. If reboot(2)
// fails it is retried; Finish returns only if it keeps failing, and the
// caller (PID 1) must then keep running rather than exit.
func Finish(sys System, reboot bool, millis func() int64, ev func(report.Event), logf func(string, ...any)) error {
	if err := sys.KillAll(unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		logf("kill remaining processes: %v", err)
	}
	sys.Sync()
	cmd, what := unix.LINUX_REBOOT_CMD_POWER_OFF, "power-off"
	if reboot {
		cmd, what = unix.LINUX_REBOOT_CMD_RESTART, "reboot"
	}
	ev(report.Event{Kind: report.EventPowerOff, Millis: millis(), Detail: what})
	var err error
	for i := 0; i < 3; i++ {
		if err = sys.Reboot(cmd); err == nil {
			return nil
		}
		logf("reboot(%s): %v", what, err)
		time.Sleep(time.Second)
	}
	return fmt.Errorf("reboot(%s): %w", what, err)
}
