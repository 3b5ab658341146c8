package signals

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCatchable(t *testing.T) {
	c := Catchable()
	for _, s := range []syscall.Signal{unix.SIGKILL, unix.SIGSTOP, 32, 33, 34} {
		if slices.Contains(c, s) {
			t.Errorf("%v listed as catchable", s)
		}
	}
	for _, s := range []syscall.Signal{unix.SIGHUP, unix.SIGQUIT, unix.SIGPIPE, unix.SIGUSR1, unix.SIGABRT,
		unix.SIGSYS, unix.SIGTRAP, unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGALRM,
		unix.SIGPWR, unix.SIGXCPU, unix.SIGSTKFLT, unix.SIGTSTP, 35, 64} {
		if !slices.Contains(c, s) {
			t.Errorf("%v missing", s)
		}
	}
	if len(c) != 59 {
		t.Errorf("%d catchable signals, want 64 - KILL, STOP, 32, 33, 34 = 59", len(c))
	}
	h := Handled()
	if len(h) != len(c)-3 || slices.Contains(h, os.Signal(unix.SIGCHLD)) || slices.Contains(h, os.Signal(unix.SIGURG)) ||
		slices.Contains(h, os.Signal(unix.SIGPROF)) {
		t.Errorf("handled %v", h)
	}
}

func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		s    syscall.Signal
		want Action
	}{
		{unix.SIGTERM, PowerOff}, {unix.SIGUSR2, PowerOff}, {unix.SIGINT, Reboot},
		{unix.SIGHUP, Ignore}, {unix.SIGQUIT, Ignore}, {unix.SIGPIPE, Ignore}, {unix.SIGUSR1, Ignore},
		{unix.SIGPWR, Ignore}, {40, Ignore},
	} {
		if got := Route(tc.s); got != tc.want {
			t.Errorf("Route(%v) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

const helperEnv = "HOTPATH_SIGNALS_HELPER"

// TestHelper is not a test: it is the process TestSurvivesEverySignal
// signals. It routes signals with Notify, then sends itself every
// catchable signal and exits 0 if it is still alive.
func TestHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process")
	}
	c := make(chan os.Signal, 128)
	if err := Notify(c); err != nil {
		os.Stdout.WriteString(err.Error() + "\n")
		os.Exit(22)
	}
	seen := map[os.Signal]bool{}
	handled := Handled()
	// One at a time: a stop signal (SIGTSTP) discards a pending SIGCONT.
	for _, s := range Catchable() {
		if err := unix.Kill(os.Getpid(), s); err != nil {
			os.Exit(20)
		}
		if !slices.Contains(handled, os.Signal(s)) {
			continue
		}
		select {
		case got := <-c:
			seen[got] = true
		case <-time.After(5 * time.Second):
			os.Stdout.WriteString("not routed: " + s.String() + "\n")
			os.Exit(21)
		}
	}
	// The C libraries' thread signals, which os/signal cannot route: at
	// SIG_DFL the first would end the process.
	for _, s := range []syscall.Signal{32, 33, 34} {
		if err := unix.Kill(os.Getpid(), s); err != nil {
			os.Exit(20)
		}
	}
	// A broken pipe on a write, as on a console that went away.
	r, w, _ := os.Pipe()
	r.Close()
	w.Write([]byte("x"))
	select {
	case got := <-c:
		if got != syscall.SIGPIPE {
			os.Exit(24)
		}
	case <-time.After(5 * time.Second):
		os.Exit(25)
	}
	time.Sleep(100 * time.Millisecond) // a fatal one would have ended us by now
	os.Stdout.WriteString("alive " + strconv.Itoa(len(seen)) + "\n")
	os.Exit(0)
}

// TestSurvivesEverySignal: a process that called Notify survives every
// catchable signal sent with kill(2) (Go's defaults would end it at the
// first, SIGHUP), and each routed signal reaches the channel.
func TestSurvivesEverySignal(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if want := "alive " + strconv.Itoa(len(Handled())); !slices.Contains(splitLines(string(out)), want) {
		t.Errorf("helper output %q, want %q", out, want)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// TestIgnoreDefaults: after Notify no signal but SIGKILL and SIGSTOP is
// at SIG_DFL (SIGCHLD has the Go runtime's handler, not SIG_IGN: children
// are still reaped by wait4).
func TestIgnoreDefaults(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDefaults$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "defaults left: []") {
		t.Errorf("helper: %s", out)
	}
}

func TestHelperDefaults(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process")
	}
	c := make(chan os.Signal, 1)
	if err := Notify(c); err != nil {
		os.Exit(22)
	}
	var left []int
	for s := syscall.Signal(1); s <= lastRT; s++ {
		if s == unix.SIGKILL || s == unix.SIGSTOP {
			continue
		}
		var old sigaction
		if err := rtSigaction(s, nil, &old); err != nil {
			os.Exit(23)
		}
		if old.handler == sigDFL {
			left = append(left, int(s))
		}
	}
	fmt.Printf("defaults left: %v\n", left)
	os.Exit(0)
}
