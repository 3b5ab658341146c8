// Command init is hotpath's PID 1. It mounts the kernel file systems,
// applies the boot steps (sysctls, NIC tuning, network configuration),
// starts the workload as PID 2, prints one boot report on the console once
// the workload accepts connections, supervises it, and powers the machine
// off in order when the power button is pressed or PID 1 gets SIGTERM or
// SIGUSR2 (Ctrl-Alt-Del, SIGINT, reboots).
//
// Nothing may make PID 1 exit or panic (the kernel would panic): every step
// runs under recover, a failed tuning only marks its step failed, and if
// the main sequence itself panics the init falls back to a minimal loop
// that still reaps children and still powers off on request.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/facts"
	"github.com/hotpath-dev/hotpath/init/netconf"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/power"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/supervise"
	"github.com/hotpath-dev/hotpath/init/sysctl"
	"github.com/safchain/ethtool"
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
	con := &console.Console{Out: os.Stdout}
	// Signals first, so a SIGTERM during boot is not lost (PID 1 ignores
	// signals it has no handler for).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR2, syscall.SIGINT)
	requests := make(chan request, 4)
	go func() {
		for s := range sigs {
			switch s {
			case syscall.SIGINT:
				requests <- request{"ctrl-alt-del (SIGINT)", true}
			default:
				requests <- request{"signal " + s.String(), false}
			}
		}
	}()
	func() {
		defer func() {
			if p := recover(); p != nil {
				con.Logf("PANIC in init: %v\n%s", p, debug.Stack())
			}
		}()
		run(con, requests)
	}()
	fallback(con, requests)
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

func run(con *console.Console, requests chan request) {
	ctx := context.Background()
	pid1 := os.Getpid() == 1
	var results []report.Step
	runStep := func(s boot.Step) report.Step {
		r := boot.RunOne(ctx, s)
		logStep(con, r)
		results = append(results, r)
		return r
	}

	if pid1 {
		runStep(mountStep())
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

	// Configuration: the baked file, then the kernel command line.
	cfg, unknown := loadConfig(con)

	runStep(boot.Step{Name: "loopback", Apply: func(context.Context, boot.Detail) error {
		return nic.NewNetlink().LinkSetUp("lo")
	}, Verify: func(context.Context, boot.Detail) error {
		up, err := nic.NewNetlink().LinkIsUp("lo")
		if err == nil && !up {
			err = errors.New("lo is down")
		}
		return err
	}})
	runStep(rlimitStep())

	settings := sysctl.Merge(sysctl.Defaults(cfg.BusyPoll, cfg.BusyRead), cfg.SysctlNames(), cfg.Sysctls)
	for _, s := range sysctl.Steps(procRoot, settings) {
		runStep(s)
	}

	// CPUs of the workload: they are the CPUs the NIC queues map to.
	online, err := cpuset.Online(sysRoot)
	if err != nil || len(online) == 0 {
		con.Logf("online cpus: %v; assuming cpu 0", err)
		online = []int{0}
	}
	cpus := online
	if cfg.WorkloadCPUs != "all" {
		cpus, _ = cpuset.ParseList(cfg.WorkloadCPUs)
	}
	nrCPUs, err := cpuset.Possible(sysRoot)
	if err != nil {
		nrCPUs = cpus[len(cpus)-1] + 1
	}

	// The NIC.
	var link *nic.Link
	var et *ethtool.Ethtool
	l, err := nic.Discover(sysRoot, cfg.NetInterface)
	discover := boot.Step{Name: "nic-discover", Apply: func(_ context.Context, d boot.Detail) error {
		if err != nil {
			return boot.Skip("%v", err)
		}
		d["name"], d["driver"], d["device"] = l.Name, l.Driver, l.Device
		return nil
	}}
	if runStep(discover).Status == report.Applied {
		link = &l
		et, err = ethtool.NewEthtool()
		if err != nil {
			con.Logf("ethtool: %v", err)
		}
	}
	if link != nil && et != nil {
		t := &nic.Tuner{SysRoot: sysRoot, ProcRoot: procRoot, Link: *link, CPUs: cpus, NrCPUs: nrCPUs,
			Ethtool: et, Netlink: nic.NewNetlink(), Opt: nic.Options{
				Channels: cfg.NICChannels, Coalesce: cfg.NICCoalesce, RxUsecs: cfg.NICRxUsecs, TxUsecs: cfg.NICTxUsecs,
				GRO: cfg.NICGRO, IRQAffinity: cfg.NICIRQAffinity, XPS: cfg.NICXPS, RPS: cfg.NICRPS, Qdisc: cfg.NICQdisc,
			}}
		for _, s := range t.Steps() {
			runStep(s)
		}
	} else {
		for _, s := range nic.SkippedSteps("no primary network interface") {
			runStep(s)
		}
	}

	// Network configuration.
	switch {
	case cfg.NetMode == "off":
		runStep(skipStep("net", "net.mode=off"))
	case link == nil:
		runStep(skipStep("net", "no primary network interface"))
	case cfg.NetMode == "static":
		runStep(netconf.StaticStep(link.Name, netconf.Lease{Addr: cfg.NetAddress, Gateway: cfg.NetGateway, MTU: cfg.NetMTU}, procRoot))
	default:
		runStep(netconf.DHCPStep(netconf.DHCPOptions{
			Interface: link.Name, Timeout: cfg.DHCPTimeout, Retries: cfg.DHCPRetries, MTU: cfg.NetMTU,
			ResolvConf: "/etc/resolv.conf", ProcRoot: procRoot,
			Log: log.New(con, "dhclient: ", 0),
		}))
	}

	// Per-instance configuration (user-data), identity, time and the
	// workload's privileges (instance.go).
	inst := instanceSteps(ctx, con, runStep, &cfg, settings)
	settings = inst.settings

	// The power button.
	runStep(boot.Step{Name: "power-button", Apply: func(_ context.Context, d boot.Detail) error {
		devs, err := power.Find(sysRoot, devRoot)
		if err != nil {
			return boot.Skip("%v", err)
		}
		if len(devs) == 0 {
			return boot.Skip("no input device reports KEY_POWER (kernel without CONFIG_INPUT_EVDEV or ACPI button?)")
		}
		w := power.Watch(ctx, devs, func(dev power.Device) {
			requests <- request{"power button (" + dev.Desc + ")", false}
		}, con.Logf)
		if len(w) == 0 {
			return fmt.Errorf("could not open any of %d power button devices", len(devs))
		}
		for _, dev := range w {
			d[dev.Name] = dev.Desc
		}
		return nil
	}})

	// The workload.
	cpuList := cpuset.FormatList(cpus)
	env := append([]string{"PATH=/bin:/sbin:/", "HOME=/",
		"HOTPATH_CPUS=" + cpuList, "HOTPATH_PORT=" + strconv.Itoa(cfg.WorkloadPort)}, cfg.WorkloadEnv...)
	rep := report.Report{
		Version: report.Version, Kernel: kernelRelease(), CPUs: len(online),
		Config: cfg.Map(), Unknown: unknown,
		Workload: &report.Workload{Path: cfg.WorkloadPath, Args: cfg.WorkloadArgs, CPUs: cpuList, Port: cfg.WorkloadPort},
	}
	sysctlNames := make([]string, len(settings))
	for i, s := range settings {
		sysctlNames[i] = s.Name
	}
	var sup *supervise.Supervisor
	sup = supervise.New(supervise.Config{
		Path: cfg.WorkloadPath, Args: cfg.WorkloadArgs, Env: env, Port: cfg.WorkloadPort,
		BackoffMin: cfg.BackoffMin, BackoffMax: cfg.BackoffMax,
		CrashLoopExits: cfg.CrashLoopExits, CrashLoopWindow: cfg.CrashLoopWindow,
		Grace: cfg.ShutdownGrace, ReadyTimeout: cfg.ReadyTimeout, Privileges: inst.supervisePrivileges(),
		Stdout: os.Stdout, Stderr: os.Stderr,
		Millis: bootMillis,
		Event: func(e report.Event) {
			con.Line(report.EventPrefix, e)
			if e.Kind == report.EventStart && rep.Workload.PID == 0 {
				rep.Workload.PID = e.PID
			}
		},
		Log: con.Logf,
		OnFirstReady: func(err error) {
			rep.ReadyMillis = bootMillis()
			if err != nil {
				rep.ReadyMillis = -1
				rep.ReadyError = err.Error()
			}
			rep.Steps = results
			fo := facts.Options{SysRoot: sysRoot, ProcRoot: procRoot, Sysctls: sysctlNames, Link: link,
				Qdiscs: nic.Qdiscs, Addrs: facts.NetlinkAddrs}
			if et != nil {
				fo.Ethtool = et
			}
			rep.Facts = facts.Read(fo, con.Logf)
			inst.fill(&rep)
			con.Line(report.ReportPrefix, rep)
			con.Logf("ready in %d ms after kernel start", rep.ReadyMillis)
		},
	})
	go func() {
		defer recoverLog(con, "reaper")
		sup.Reap(ctx)
	}()
	go func() {
		defer recoverLog(con, "supervisor")
		sup.Run()
	}()

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

func recoverLog(con *console.Console, what string) {
	if p := recover(); p != nil {
		con.Logf("PANIC in %s: %v\n%s", what, p, debug.Stack())
	}
}

func logStep(con *console.Console, r report.Step) {
	switch r.Status {
	case report.Applied:
		con.Logf("step %s: applied %v", r.Name, r.Detail)
	case report.Skipped:
		con.Logf("step %s: skipped: %s", r.Name, r.Reason)
	default:
		con.Logf("step %s: FAILED: %s", r.Name, r.Error)
	}
}

func skipStep(name, reason string) boot.Step {
	return boot.Step{Name: name, Apply: func(context.Context, boot.Detail) error { return boot.Skip("%s", reason) }}
}

// loadConfig reads the baked file and the command-line overrides. Bad
// lines are reported and skipped; unknown keys are reported on the console
// and returned for the boot report.
func loadConfig(con *console.Console) (config.Config, []string) {
	cfg := config.Default()
	var unknown []string
	if f, err := os.Open(config.Path); err == nil {
		var perr error
		cfg, perr = config.Parse(f)
		f.Close()
		if perr != nil {
			con.Logf("%s: %v", config.Path, perr)
		}
		unknown = append(unknown, config.Unknown(perr)...)
	} else if !errors.Is(err, os.ErrNotExist) {
		con.Logf("config: %v", err)
	} else {
		con.Logf("no %s: defaults", config.Path)
	}
	if b, err := os.ReadFile(procRoot + "/cmdline"); err == nil {
		if err := cfg.ApplyCmdline(string(b)); err != nil {
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
		if cfg.NetMode == "static" && !cfg.NetAddress.IsValid() {
			cfg.NetMode = "dhcp"
			con.Logf("falling back to net.mode=dhcp")
		}
		if cfg.BackoffMin <= 0 || cfg.BackoffMax < cfg.BackoffMin {
			d := config.Default()
			cfg.BackoffMin, cfg.BackoffMax = d.BackoffMin, d.BackoffMax
		}
	}
	return cfg, unknown
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// rlimitStep raises the open-file limit that the workload inherits: one
// descriptor per connection.
func rlimitStep() boot.Step {
	const n = 1 << 20
	return boot.Step{Name: "rlimit-nofile", Apply: func(_ context.Context, d boot.Detail) error {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("setrlimit nofile %d: %w", n, err)
		}
		d["nofile"] = strconv.Itoa(n)
		return nil
	}, Verify: func(context.Context, boot.Detail) error {
		var r unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
			return err
		}
		if r.Cur != n {
			return fmt.Errorf("nofile is %d", r.Cur)
		}
		return nil
	}}
}
