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
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"unsafe"

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

// Catchable returns every signal os/signal can route: 1 to SIGRTMAX
// without SIGKILL and SIGSTOP, and without 32 to 34, which the C libraries
// reserve for their threads: the Go runtime handles 33 itself and leaves 32
// and 34 at SIG_DFL, which os/signal cannot change (see IgnoreDefaults).
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
// default actions, and sets every signal still at SIG_DFL to SIG_IGN
// (IgnoreDefaults). Call it first in main: a signal before it may still
// kill the process.
func Notify(c chan<- os.Signal) error {
	signal.Notify(c, Handled()...)
	_, err := IgnoreDefaults()
	return err
}

// sigaction is the kernel's struct sigaction on amd64 and arm64.
type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const (
	sigDFL = 0
	sigIGN = 1
)

// IgnoreDefaults sets every signal whose action is still SIG_DFL to
// SIG_IGN and returns them: in practice 32 and 34, which the Go runtime
// leaves alone. One would expect the kernel to drop a SIG_DFL signal sent
// to PID 1 (SIGNAL_UNKILLABLE), but kill(1, 32) from the workload was
// measured to panic the 6.1 appliance kernel ("Attempted to kill init!
// exitcode=0x00000020"), so PID 1 leaves no signal at its default.
// SIGCHLD is never ignored (that would reap children behind the
// supervisor's back), nor SIGKILL and SIGSTOP (which cannot be).
func IgnoreDefaults() ([]syscall.Signal, error) {
	var set []syscall.Signal
	for s := syscall.Signal(1); s <= lastRT; s++ {
		switch s {
		case unix.SIGKILL, unix.SIGSTOP, unix.SIGCHLD:
			continue
		}
		var old sigaction
		if err := rtSigaction(s, nil, &old); err != nil {
			return set, fmt.Errorf("sigaction %d: %w", s, err)
		}
		if old.handler != sigDFL {
			continue
		}
		ign := sigaction{handler: sigIGN}
		if err := rtSigaction(s, &ign, nil); err != nil {
			return set, fmt.Errorf("sigaction %d SIG_IGN: %w", s, err)
		}
		set = append(set, s)
	}
	return set, nil
}

func rtSigaction(s syscall.Signal, act, old *sigaction) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(s),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
