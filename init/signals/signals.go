// Package signals decides what PID 1 does with each signal. The kernel
// delivers to PID 1 only the signals it has a handler for, and the Go
// runtime installs one for every signal at start; left at Go's defaults,
// SIGHUP, SIGUSR1, SIGALRM, SIGPIPE on the console, ... exit the process
// and SIGQUIT, SIGABRT, SIGSYS, ... dump goroutines and exit: PID 1 exiting
// is a kernel panic. So every catchable signal is routed through Notify,
// and Route says what each means: a shutdown request, or nothing (logged
// and ignored).
package signals

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Action is what PID 1 does on a signal.
type Action int

const (
	Ignore   Action = iota // log it, carry on
	PowerOff               // orderly shutdown, then power off
	Reboot                 // orderly shutdown, then restart
)

func (a Action) String() string {
	switch a {
	case PowerOff:
		return "power-off"
	case Reboot:
		return "reboot"
	}
	return "ignore"
}

// lastRT is SIGRTMAX on Linux.
const lastRT = 64

// Catchable returns every signal a Go program can catch: 1 to SIGRTMAX
// without SIGKILL and SIGSTOP, and without 32 to 34, which the C libraries
// reserve for their threads: the Go runtime handles 33 itself and leaves 32
// and 34 at SIG_DFL, which os/signal cannot change. That is safe for PID 1:
// the kernel drops a signal sent from user space to the init when its
// action is SIG_DFL (SIGNAL_UNKILLABLE).
func Catchable() []syscall.Signal {
	var out []syscall.Signal
	for s := syscall.Signal(1); s <= lastRT; s++ {
		switch s {
		case unix.SIGKILL, unix.SIGSTOP, 32, 33, 34:
			continue
		}
		out = append(out, s)
	}
	return out
}

// Handled returns the signals Notify routes: Catchable without SIGCHLD
// (the supervisor's reaper notifies it itself), SIGURG (the Go runtime's
// preemption signal, which it already ignores; routing it would wake the
// handler at every preemption) and SIGPROF (the runtime's profiler keeps
// it, os/signal cannot route it; unprofiled, the runtime ignores it).
func Handled() []os.Signal {
	var out []os.Signal
	for _, s := range Catchable() {
		if s == unix.SIGCHLD || s == unix.SIGURG || s == unix.SIGPROF {
			continue
		}
		out = append(out, s)
	}
	return out
}

// Route returns what PID 1 does on s: SIGTERM and SIGUSR2 (what init
// systems and busybox halt/poweroff send) power off, SIGINT (the kernel's
// Ctrl-Alt-Del once CAD is off) reboots, everything else is ignored.
func Route(s os.Signal) Action {
	switch s {
	case unix.SIGTERM, unix.SIGUSR2:
		return PowerOff
	case unix.SIGINT:
		return Reboot
	}
	return Ignore
}

// Notify routes every handled signal to c, replacing the Go runtime's
// default actions. Call it first in main: a signal before it may still
// kill the process.
func Notify(c chan<- os.Signal) {
	signal.Notify(c, Handled()...)
}
