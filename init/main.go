// Command init is hotpath's PID 1. It mounts the kernel file systems,
// reads its configuration, runs the boot steps (the table in sequence.go:
// sysctls, the workload's CPUs, NIC tuning, network configuration, the
// power button), starts the workload as PID 2, prints one boot report on
// the console once the workload accepts connections (or at the ready
// deadline, whatever the workload does), supervises it, keeps the network
// right (DHCP retried in the background, NIC steps re-applied after a link
// reset), and powers the machine off in order when the power button is
// pressed or PID 1 gets SIGTERM or SIGUSR2 (Ctrl-Alt-Del, SIGINT,
// reboots). Every other signal is logged and ignored (package signals).
//
// Nothing may make PID 1 exit or panic (the kernel would panic): every step
// runs under recover, a failed tuning only marks its step failed, and if
// the main sequence itself panics the init falls back to a minimal loop
// that still reaps children and still powers off on request.
package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/crng"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/signals"
	"github.com/hotpath-dev/hotpath/init/supervise"
	"golang.org/x/sys/unix"
)

const (
	procRoot = "/proc"
	sysRoot  = "/sys"
	devRoot  = "/dev"
)

// bootMillis is CLOCK_BOOTTIME in milliseconds: time since the kernel
// started, suspend included.
func bootMillis() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return -1
	}
	return ts.Nano() / 1e6
}

// request is a shutdown request: power off, or reboot.
type request struct {
	why    string
	reboot bool
}

func main() {
	started := bootClock() // the timeline's kernel phase ends here
	con := &console.Console{Out: os.Stdout, Hold: console.KernelHold("/proc", os.Stdout)}
	// Signals first, so a SIGTERM during boot is not lost and no signal
	// meets the Go runtime's default action (exit: a kernel panic).
	sigs := make(chan os.Signal, 16)
	sigErr := signals.Notify(sigs)
	requests := make(chan request, 4)
	go routeSignals(con, sigs, requests)
	if sigErr != nil {
		con.Logf("signals: %v", sigErr)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				con.Logf("PANIC in init: %v\n%s", p, debug.Stack())
			}
		}()
		run(con, requests, started)
	}()
	fallback(con, requests)
}

// routeSignals turns shutdown signals into requests and logs the others,
// which PID 1 ignores (the first of each kind, then every 100th, so that a
// workload looping on kill(1, ...) cannot flood the console).
func routeSignals(con *console.Console, sigs <-chan os.Signal, requests chan<- request) {
	seen := map[os.Signal]int{}
	for s := range sigs {
		var r request
		switch signals.Route(s) {
		case signals.Reboot:
			r = request{"ctrl-alt-del (" + unix.SignalName(s.(syscall.Signal)) + ")", true}
		case signals.PowerOff:
			r = request{"signal " + unix.SignalName(s.(syscall.Signal)), false}
		default:
			if seen[s]%100 == 0 {
				con.Logf("signal %v (%d times) ignored", s, seen[s]+1)
			}
			seen[s]++
			continue
		}
		select {
		case requests <- r:
		default: // a shutdown is already pending
		}
	}
}

// fallback keeps PID 1 alive after the main sequence failed: it reaps
// children and honours shutdown requests with the plain sequence.
func fallback(con *console.Console, requests chan request) {
	con.Logf("init in fallback mode: reaping and waiting for shutdown")
	tick := time.NewTicker(time.Second)
	for {
		select {
		case r := <-requests:
			if os.Getpid() != 1 {
				os.Exit(1)
			}
			unix.Kill(-1, unix.SIGTERM)
			time.Sleep(5 * time.Second)
			supervise.Finish(supervise.Kernel{}, r.reboot, bootMillis,
				func(e report.Event) { con.Line(report.EventPrefix, e) }, con.Logf)
		case <-tick.C:
			for {
				pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
				if err != nil || pid <= 0 {
					break
				}
			}
		}
	}
}

func run(con *console.Console, requests chan request, started float64) {
	ctx := context.Background()
	pid1 := os.Getpid() == 1
	m := &machine{ctx: ctx, con: con, procRoot: procRoot, sysRoot: sysRoot, devRoot: devRoot, requests: requests,
		initMillis: started}
	if pid1 {
		m.run(mountStep())
		attachConsole(con)
		// Ctrl-Alt-Del sends SIGINT to PID 1 instead of an immediate reboot.
		if err := unix.Reboot(unix.LINUX_REBOOT_CMD_CAD_OFF); err != nil {
			con.Logf("reboot(CAD_OFF): %v", err)
		}
	} else {
		// Outside its appliance the init would retune the host (sysctls,
		// NIC) and DHCP on its network: refuse unless asked explicitly.
		if os.Getenv("HOTPATH_INIT_FORCE") != "1" {
			con.Logf("not PID 1 (pid %d): refusing to tune this machine (set HOTPATH_INIT_FORCE=1 to run anyway)", os.Getpid())
			os.Exit(2)
		}
		con.Logf("not PID 1 (pid %d): no mounts, no power off", os.Getpid())
	}
	con.Logf("starting, kernel uptime %d ms", bootMillis())
	m.hwErrors = openHardwareErrors(con, devRoot)
	rng := watchCRNG(con)

	// Configuration: the baked file, then the kernel command line (so
	// after the mounts: /proc/cmdline).
	var unknown []string
	var layers map[string]string
	m.cfg, unknown, layers = loadConfig(con, config.Path, procRoot+"/cmdline")
	m.inst = newInstance(layers)
	m.obs = startObserver(con, m.cfg, m.resultsNow())
	m.obs.hwErrors = m.hwErrors
	m.obs.setTimeline(m.timelineNow)
	m.boot()

	sup := startWorkload(m, rng, unknown)
	afterBoot(m)

	r := <-requests
	con.Logf("shutdown: %s", r.why)
	sup.Stop(r.why)
	<-sup.Done()
	if !pid1 {
		os.Exit(0)
	}
	if err := supervise.Finish(supervise.Kernel{}, r.reboot, bootMillis,
		func(e report.Event) { con.Line(report.EventPrefix, e) }, con.Logf); err != nil {
		con.Logf("%v", err)
	}
}

// crngState is when the kernel's CRNG became ready, -1 until then.
type crngState struct {
	atInit bool
	millis atomic.Int64
}

func (c *crngState) report() *report.CRNG {
	return &report.CRNG{ReadyAtInit: c.atInit, ReadyMillis: c.millis.Load()}
}

// watchCRNG records when the CRNG becomes ready, with an event if that
// happens after the init started. Nothing waits for it.
func watchCRNG(con *console.Console) *crngState {
	c := &crngState{atInit: crng.Ready()}
	if c.atInit {
		c.millis.Store(bootMillis())
		return c
	}
	c.millis.Store(-1)
	con.Logf("crng not ready yet; nothing at boot waits for it")
	go func() {
		defer recoverLog(con, "crng")
		if err := crng.Wait(); err != nil {
			con.Logf("crng: %v", err)
			return
		}
		ms := bootMillis()
		c.millis.Store(ms)
		con.Line(report.EventPrefix, report.Event{Kind: report.EventCRNGReady, Millis: ms})
	}()
	return c
}

func recoverLog(con *console.Console, what string) {
	if p := recover(); p != nil {
		con.Logf("PANIC in %s: %v\n%s", what, p, debug.Stack())
	}
}

// loadConfig reads the baked file (confPath: config.Path) and the
// command-line overrides (cmdlinePath: /proc/cmdline). Bad lines are
// reported and skipped; unknown keys are reported on the console and
// returned for the boot report, with where each key that was set came
// from (config.Sources).
func loadConfig(con *console.Console, confPath, cmdlinePath string) (config.Config, []string, map[string]string) {
	cfg := config.Default()
	var unknown []string
	file, err := os.ReadFile(confPath)
	if err == nil {
		var perr error
		cfg, perr = config.Parse(bytes.NewReader(file))
		if perr != nil {
			con.Logf("%s: %v", confPath, perr)
		}
		unknown = append(unknown, config.Unknown(perr)...)
	} else if !errors.Is(err, os.ErrNotExist) {
		con.Logf("config: %v", err)
	} else {
		con.Logf("no %s: defaults", confPath)
	}
	cmdline, err := os.ReadFile(cmdlinePath)
	if err == nil {
		if err := cfg.ApplyCmdline(string(cmdline)); err != nil {
			con.Logf("kernel command line: %v", err)
			for _, k := range config.Unknown(err) {
				unknown = append(unknown, config.CmdlinePrefix+k)
			}
		}
	}
	if len(unknown) > 0 {
		con.Logf("UNKNOWN configuration keys (ignored): %v", unknown)
	}
	if err := cfg.Validate(); err != nil {
		con.Logf("%v", err)
		if cfg.Net.Mode == config.NetStatic && !cfg.Net.Address.IsValid() {
			cfg.Net.Mode = config.NetDHCP
			con.Logf("falling back to net.mode=dhcp")
		}
		if cfg.Supervise.BackoffMin <= 0 || cfg.Supervise.BackoffMax < cfg.Supervise.BackoffMin {
			d := config.Default()
			cfg.Supervise.BackoffMin, cfg.Supervise.BackoffMax = d.Supervise.BackoffMin, d.Supervise.BackoffMax
		}
	}
	return cfg, unknown, config.Sources(file, string(cmdline))
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
