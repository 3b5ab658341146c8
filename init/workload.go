package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/facts"
	"github.com/hotpath-dev/hotpath/init/napi"
	"github.com/hotpath-dev/hotpath/init/netconf"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/supervise"
)

// startWorkload starts the supervisor; the boot report is printed when
// the workload first accepts, or at the ready deadline whatever it does.
func startWorkload(m *machine, rng *crngState, unknown []string) *supervise.Supervisor {
	con, cfg := m.con, m.cfg
	execStart := m.now()
	cpuList := cpuset.FormatList(m.workloadCPUs())
	env := append([]string{"PATH=/bin:/sbin:/", "HOME=/",
		"HOTPATH_CPUS=" + cpuList, "HOTPATH_PORT=" + strconv.Itoa(cfg.WorkloadPort)}, cfg.WorkloadEnv...)
	// Step 10's workload half, with the NIC's deferral (init/napi).
	env = append(env, napi.WorkloadEnv(napiSettings(cfg))...)
	br := newBootReport(m, cpuList, unknown)
	br.execStart = execStart
	// The workload's output goes through the console's count, so that the
	// report is printed again before it leaves EC2's 64 KiB window.
	stdout, stderr := m.obs.workloadOutput(con)
	sup := supervise.New(supervise.Config{
		Path: cfg.WorkloadPath, Args: cfg.WorkloadArgs, Env: env, Port: cfg.WorkloadPort,
		Policy: cfg.Supervise, ReadyTimeout: cfg.ReadyTimeout, Liveness: livenessOf(cfg),
		Privileges: m.inst.supervisePrivileges(),
		Stdout:     stdout, Stderr: stderr,
		Millis: bootMillis,
		Event: func(e report.Event) {
			con.Line(report.EventPrefix, e)
			br.event(e)
		},
		Log:          con.Logf,
		OnFirstReady: func(err error) { br.finish(m, rng, err) },
	})
	m.obs.supervise(sup)
	go func() {
		defer recoverLog(con, "reaper")
		sup.Reap(m.ctx)
	}()
	go func() {
		defer recoverLog(con, "supervisor")
		sup.Run()
	}()
	return sup
}

// newBootReport starts the boot report. It goes to the console and to
// /report, so the values of secret keys stay out of it (config.ReportMap,
// ReportArgs, and RedactCmdline in finish) unless report.secrets=show.
func newBootReport(m *machine, cpuList string, unknown []string) *bootReport {
	cfg := m.cfg
	return &bootReport{rep: report.Report{
		Version: report.Version, Kernel: kernelRelease(), CPUs: len(m.online),
		Config: cfg.ReportMap(), Unknown: unknown,
		Workload: &report.Workload{Path: cfg.WorkloadPath, Args: cfg.ReportArgs(), CPUs: cpuList, Port: cfg.WorkloadPort},
	}}
}

// livenessOf is the supervisor's liveness probe for liveness.probe: nil
// (off), a TCP connect, or an HTTP GET of a path.
func livenessOf(cfg config.Config) *supervise.Liveness {
	l := cfg.Liveness
	if l.Probe == "off" {
		return nil
	}
	live := &supervise.Liveness{Interval: l.Interval, Timeout: l.Timeout, Failures: l.Failures}
	if l.Probe != "tcp" {
		live.Path = l.Probe
	}
	return live
}

// bootReport is the boot report while it is put together: the workload's
// first PID comes with an event, the rest when the workload first accepts
// (or its ready deadline passes).
type bootReport struct {
	mu  sync.Mutex
	rep report.Report
	// execStart is when the workload's start was asked for, started
	// when its process ran (its first EventStart): the timeline's
	// workload-exec phase.
	execStart, started float64
}

// event keeps the PID and the time of the first start.
func (b *bootReport) event(e report.Event) {
	if e.Kind != report.EventStart {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rep.Workload.PID == 0 {
		b.rep.Workload.PID = e.PID
		b.started = max(float64(e.Millis), b.execStart)
	}
}

// finish completes the report with the steps, the facts as they are now,
// the CRNG and what the per-instance steps found, hands it to the
// management endpoint and prints it; err is why the workload is not ready.
func (b *bootReport) finish(m *machine, rng *crngState, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rep := &b.rep
	rep.ReadyMillis = bootMillis()
	if err != nil {
		rep.ReadyMillis = -1
		rep.ReadyError = err.Error()
	}
	rep.Steps, rep.Timeline = b.stepsAndTimeline(m, err == nil)
	sysctlNames := make([]string, len(m.settings))
	for i, s := range m.settings {
		sysctlNames[i] = s.Name
	}
	fo := facts.Options{SysRoot: m.sysRoot, ProcRoot: m.procRoot, Sysctls: sysctlNames, Link: m.link,
		Qdiscs: nic.Qdiscs, QdiscStats: nic.QdiscStats, Addrs: facts.NetlinkAddrs, Ethtool: m.ethtool}
	rep.Facts = facts.Read(fo, m.con.Logf)
	rep.Facts.Cmdline = m.cfg.RedactCmdline(rep.Facts.Cmdline)
	rep.CRNG = rng.report()
	rep.PreviousBoot, rep.NUMA = m.previous, m.numa
	rep.HardwareErrors = m.hardwareErrors()
	m.inst.fill(rep)
	m.obs.report(*rep)
	m.con.Report(*rep)
	if err != nil {
		m.con.Logf("NOT READY: %v", err)
	} else {
		m.con.Logf("ready in %d ms after kernel start", rep.ReadyMillis)
	}
}

// stepsAndTimeline puts the workload's phases on the machine's timeline
// (exec, and ready when it is) and returns the steps and the timeline as
// they stand, together (a background step started meanwhile is in both or
// in neither).
func (b *bootReport) stepsAndTimeline(m *machine, ready bool) ([]report.Step, []report.Phase) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.started > 0 {
		m.timeline = append(m.timeline, report.Phase{Name: report.PhaseExec, Start: b.execStart, End: b.started})
		if ready {
			m.timeline = append(m.timeline, report.Phase{Name: report.PhaseReady, Start: b.started,
				End: max(float64(b.rep.ReadyMillis), b.started)})
		}
	}
	return slices.Clone(m.results), slices.Clone(m.timeline)
}

// afterBoot starts what keeps the network right for the machine's life:
// DHCP retried in the background when the boot could not get a lease, and
// the NIC steps a device reset undoes run again when the link comes back.
// The retry needs only the link; re-applying needs the tuner (a NIC whose
// ethtool could not be opened has none, and still gets DHCP).
func afterBoot(m *machine) {
	if m.link == nil {
		return
	}
	var reapplyMu sync.Mutex
	reapply := func(why string) {
		if m.tuner == nil {
			return
		}
		reapplyMu.Lock()
		defer reapplyMu.Unlock()
		var res []report.Step
		var summary []string
		for _, s := range m.tuner.ReapplySteps() {
			r := boot.RunOne(m.ctx, s)
			logStep(m.con, r)
			res = append(res, r)
			summary = append(summary, r.Name+"="+string(r.Status))
		}
		m.con.Line(report.EventPrefix, report.Event{Kind: report.EventNICReapply, Millis: bootMillis(),
			Detail: why + ": " + strings.Join(summary, " "), Steps: res})
	}
	results := m.resultsNow()
	if m.dhcp != nil && failed(results, "net-dhcp") {
		m.background(dhcpRetryStep(m, reapply), nil)
	}
	if s := ipv6RetryStep(m, results); s != nil {
		m.background(*s, nil)
	}
	if m.tuner == nil {
		return
	}
	down := false
	err := nic.WatchLink(m.ctx, nil, m.link.Name, func(up bool) {
		defer recoverLog(m.con, "link watch")
		if !up {
			down = true
			m.con.Line(report.EventPrefix, report.Event{Kind: report.EventLink, Millis: bootMillis(), Detail: "down"})
			return
		}
		if !down {
			return // the state at subscription
		}
		down = false
		m.con.Line(report.EventPrefix, report.Event{Kind: report.EventLink, Millis: bootMillis(), Detail: "up"})
		reapply("link up")
	}, m.con.Logf)
	if err != nil {
		m.con.Logf("%v: NIC steps will not be re-applied after a link reset", err)
	}
}

// dhcpRetryStep is the DHCPv4 lease taken in the background after the
// boot's network deadline: a step of its own (net-dhcp-retry), whose
// outcome comes when a server answers.
func dhcpRetryStep(m *machine, reapply func(string)) boot.Step {
	o := *m.dhcp
	return boot.Step{Name: "net-dhcp-retry", Background: true, Apply: func(ctx context.Context, d boot.Detail) error {
		m.dhcpRetrying.Store(true)
		defer m.dhcpRetrying.Store(false)
		m.con.Logf("no DHCP lease at boot: retrying in the background (back-off up to %v)", m.cfg.Net.DHCPBackoffMax)
		got := false
		netconf.KeepTrying(ctx, o, time.Second, m.cfg.Net.DHCPBackoffMax, func(l netconf.Lease, attempts int) {
			got = true
			d["lease"], d["attempts"] = netconf.Describe(l), strconv.Itoa(attempts)
			m.con.Line(report.EventPrefix, report.Event{Kind: report.EventNetBound, Millis: bootMillis(),
				Detail: fmt.Sprintf("%s after %d background attempts", netconf.Describe(l), attempts)})
			reapply("lease")
		})
		if !got {
			return fmt.Errorf("no lease: %w", ctx.Err())
		}
		return nil
	}}
}

func failed(results []report.Step, name string) bool {
	for _, r := range results {
		if r.Name == name {
			return r.Status == report.Failed
		}
	}
	return false
}
